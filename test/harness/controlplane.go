// Package harness runs the real control plane and the real project binaries
// for integration and end-to-end tests: kube-apiserver and etcd built by
// hack/tools (started through envtest, nothing downloaded), the binaries built
// from this module, and real dig.
package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// AssetsEnv overrides where the kube-apiserver and etcd binaries are found.
const AssetsEnv = "YURTDNS_K8S_ASSETS"

// Service CIDRs of the harness apiserver. Tests choose ClusterIPs inside them.
const (
	ServiceCIDRv4 = "10.96.0.0/16"
	ServiceCIDRv6 = "fd00:10:96::/112"
)

// envtest logs through controller-runtime's logger and warns (with a stack
// trace) when none is set; the harness has nothing to add there.
var silenceControllerRuntimeLog sync.Once

// Options tune the control plane.
type Options struct {
	// DualStack gives the apiserver an IPv4 and an IPv6 service range, so
	// dual-stack Services can be created.
	DualStack bool
	// IPv6Only gives the apiserver the IPv6 service range alone, as on a
	// single-stack IPv6 cluster.
	IPv6Only bool
	// AuditLog makes the apiserver write every request to a JSON-lines audit
	// log (metadata level), read back with ControlPlane.AuditEvents.
	AuditLog bool
	// EtcdQuotaBytes raises etcd's space quota (2 GiB by default) for
	// fleets of kubelet-sized Nodes.
	EtcdQuotaBytes int64
}

// ControlPlane is a running kube-apiserver + etcd.
type ControlPlane struct {
	// Config is an admin (system:masters) client config.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file for the binaries under test.
	Kubeconfig string
	// Client is an admin clientset.
	Client kubernetes.Interface

	env      *envtest.Environment
	auditLog string
	ipv6Only bool
}

// RepoRoot is the directory of this module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isRootModule(data) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/yurtdns/yurtdns above the working directory")
		}
		dir = parent
	}
}

func isRootModule(goMod []byte) bool {
	const first = "module github.com/yurtdns/yurtdns\n"
	return len(goMod) >= len(first) && string(goMod[:len(first)]) == first
}

// AssetsDir is where hack/tools puts kube-apiserver and etcd.
func AssetsDir() (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "k8s"), nil
}

// Start runs a control plane for the test and stops it when the test ends.
func Start(t TB, opts Options) *ControlPlane {
	t.Helper()
	assets, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			t.Fatalf("%s not found in %s: run `make test-tools` to build the control-plane binaries (%v)", bin, assets, err)
		}
	}

	silenceControllerRuntimeLog.Do(func() { ctrllog.SetLogger(logr.Discard()) })
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 60 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	serviceRange := ServiceCIDRv4
	switch {
	case opts.IPv6Only:
		serviceRange = ServiceCIDRv6
	case opts.DualStack:
		serviceRange += "," + ServiceCIDRv6
	}
	apiserver := env.ControlPlane.GetAPIServer()
	apiserver.Configure().Set("service-cluster-ip-range", serviceRange)
	if opts.IPv6Only {
		// The kubernetes Service's address is of the primary range's family,
		// and so must its endpoint be; the endpoint reconciler refuses a
		// loopback one, and no test here asks the kubernetes Service.
		apiserver.Configure().Set("advertise-address", "::1").Set("endpoint-reconciler-type", "none")
	}
	if opts.EtcdQuotaBytes > 0 {
		if env.ControlPlane.Etcd == nil {
			env.ControlPlane.Etcd = &envtest.Etcd{}
		}
		env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.FormatInt(opts.EtcdQuotaBytes, 10))
	}
	// A directory the harness owns (envtest deletes one it made itself when
	// the apiserver stops) keeps the serving and client CAs across
	// StopAPIServer/StartAPIServer, so every kubeconfig stays valid.
	apiserver.CertDir = t.TempDir()
	cp := &ControlPlane{env: env, ipv6Only: opts.IPv6Only}
	if opts.AuditLog {
		cp.auditLog = filepath.Join(t.TempDir(), "audit.log")
		policy := filepath.Join(t.TempDir(), "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			t.Fatal(err)
		}
		apiserver.Configure().Set("audit-policy-file", policy).Set("audit-log-path", cp.auditLog).
			Set("audit-log-format", "json").Set("audit-log-mode", "blocking")
	}

	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})

	admin, err := env.AddUser(envtest.User{Name: "harness-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatalf("adding admin user: %v", err)
	}
	cp.Config = admin.Config()
	cp.Kubeconfig = cp.writeKubeconfig(t, admin)
	cp.Client = kubernetes.NewForConfigOrDie(cp.Config)
	stop := cp.finalizeNamespaces()
	t.Cleanup(stop) // before the control plane stops (cleanups run last first)
	return cp
}

// finalizeNamespaces stands in for the namespace controller, which envtest
// does not run and every cluster does, until stop is called: a deleted
// namespace's ConfigMaps, Roles and RoleBindings (what yurtdns puts in one)
// are deleted and the namespace is finalized.
func (cp *ControlPlane) finalizeNamespaces() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c := cp.UnthrottledClient()
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if nss, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
				for _, ns := range nss.Items {
					if ns.DeletionTimestamp != nil {
						finalizeNamespace(ctx, c, ns)
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

func finalizeNamespace(ctx context.Context, c kubernetes.Interface, ns corev1.Namespace) {
	all, del := metav1.ListOptions{}, metav1.DeleteOptions{}
	if c.CoreV1().ConfigMaps(ns.Name).DeleteCollection(ctx, del, all) != nil ||
		c.RbacV1().RoleBindings(ns.Name).DeleteCollection(ctx, del, all) != nil ||
		c.RbacV1().Roles(ns.Name).DeleteCollection(ctx, del, all) != nil {
		return // next round
	}
	ns.Spec.Finalizers = nil
	_, _ = c.CoreV1().Namespaces().Finalize(ctx, &ns, metav1.UpdateOptions{})
}

// KubeconfigFor provisions a user (authenticated by client certificate) and
// returns the path of a kubeconfig for it, to run a binary with exactly that
// identity's permissions.
func (cp *ControlPlane) KubeconfigFor(t TB, name string, groups ...string) string {
	t.Helper()
	user, err := cp.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		t.Fatalf("adding user %s: %v", name, err)
	}
	return cp.writeKubeconfig(t, user)
}

func (cp *ControlPlane) writeKubeconfig(t TB, user *envtest.AuthenticatedUser) string {
	t.Helper()
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("rendering kubeconfig: %v", err)
	}
	f, err := os.CreateTemp(t.TempDir(), "kubeconfig-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash or a lost
// network would end it (etcd keeps running with its data), to test how the
// binaries ride out an outage. envtest's own Stop drains watches gracefully
// for tens of seconds, which is not an outage. StartAPIServer ends the outage.
func (cp *ControlPlane) KillAPIServer(t TB) {
	t.Helper()
	pid, err := findProcess("kube-apiserver", "--secure-port="+cp.env.ControlPlane.APIServer.SecureServing.Port)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("killing kube-apiserver (pid %d): %v", pid, err)
	}
	// Reap it through envtest so its cleanup sees it exited.
	if err := cp.env.ControlPlane.APIServer.Stop(); err != nil {
		t.Fatalf("reaping kube-apiserver: %v", err)
	}
}

// StartAPIServer starts kube-apiserver again after KillAPIServer: same
// etcd and data, same port, same certificates, so clients reconnect with
// the credentials they had. It returns once /healthz answers.
func (cp *ControlPlane) StartAPIServer(t TB) {
	t.Helper()
	if err := cp.env.ControlPlane.APIServer.Start(); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
}

// findProcess returns the pid of the process whose command line has the
// binary name and the argument.
func findProcess(binary, arg string) (int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == binary && slices.Contains(args, arg) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process with %s", binary, arg)
}

// UnthrottledClient is an admin clientset without client-go's client-side
// rate limit (5 QPS), for tests that make bursts of changes.
func (cp *ControlPlane) UnthrottledClient() kubernetes.Interface {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	return kubernetes.NewForConfigOrDie(cfg)
}

var watchMetric = regexp.MustCompile(`(?m)^apiserver_longrunning_requests\{[^}]*resource="(configmaps|services)"[^}]*verb="WATCH"[^}]*\} (\d+)$`)

// OpenWatches counts the watches on ConfigMaps and Services the apiserver
// is serving (its own loopback informers included), to catch leaks.
func (cp *ControlPlane) OpenWatches(t TB) int {
	t.Helper()
	body, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range watchMetric.FindAllSubmatch(body, -1) {
		v, _ := strconv.Atoi(string(m[2]))
		n += v
	}
	return n
}
