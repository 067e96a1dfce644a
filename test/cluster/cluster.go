package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

const (
	// KubernetesVersion is the version hack/tools builds into Bin: kubectl's
	// always, the cluster's unless Config.StartVersion says otherwise, and
	// the one a cluster started at an older version is upgraded to.
	KubernetesVersion = "v1.37.1"
	// PreviousKubernetesVersion is the version make k8s-prev builds into
	// Bin/PreviousKubernetesVersion/: a cluster to upgrade starts there.
	PreviousKubernetesVersion = "v1.36.3"
)

// Config says where the cluster's inputs and state are.
type Config struct {
	// Dir holds everything the cluster writes; a cluster left there by a
	// killed run is torn down first. It must not lie under /etc, /var, /opt,
	// /usr or /run, which the nodes overlay.
	Dir string
	// Bin holds the binaries hack/tools builds (make test-tools).
	Bin string
	// Images are more image archives imported on every node (make image's).
	Images []string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// StartVersion is the Kubernetes version the cluster is made at:
	// kubeadm, the kubelets, the control plane and kube-proxy from
	// Bin/StartVersion/ (etcd, pause and CoreDNS are Bin's, tagged as that
	// kubeadm names them). Empty is KubernetesVersion. Every node holds
	// KubernetesVersion's images too, for kubeadm upgrade.
	StartVersion string
}

// Cluster is a running two-node kubeadm cluster.
type Cluster struct {
	Nodes []*Node
	// Kubeconfig is kubeadm's admin.conf; its server is reachable from the
	// machine's root network namespace.
	Kubeconfig string

	dir          string
	cacheDir     string
	binDir       string
	startVersion string
	log          io.Writer
	pause        string   // kubeadm's pause image, on every node
	images       []string // the archives every node imported
	spare        *Node
	sites        []*site
	// settingsBefore are machineSysctls' values before the cluster
	// started: what Leftovers compares with.
	settingsBefore map[string]string
}

// The nodes: master-1, master-2 and master-3, the cloud's control-plane
// nodes behind haproxy; worker-1, an edge node on the cloud's network; and
// edge-a1 and edge-b1, the edge nodes of two sites that share one node
// address, each behind its own NAT router.
func newNodes(c *Cluster) []*Node {
	siteA := newSite("site-a", "sa", "198.51.100.21", "2001:db8:100::21")
	siteB := newSite("site-b", "sb", "198.51.100.22", "2001:db8:100::22")
	c.sites = []*site{siteA, siteB}
	nodes := []*Node{
		{Name: "master-1", IP: "198.51.100.10", IP6: "2001:db8:100::10", PodCIDR: "10.244.0.0/24", PodCIDR6: "2001:db8:244::/64", short: "m1", ControlPlane: true},
		{Name: "master-2", IP: "198.51.100.16", IP6: "2001:db8:100::16", PodCIDR: "10.244.6.0/24", PodCIDR6: "2001:db8:244:6::/64", short: "m2", ControlPlane: true},
		{Name: "master-3", IP: "198.51.100.17", IP6: "2001:db8:100::17", PodCIDR: "10.244.7.0/24", PodCIDR6: "2001:db8:244:7::/64", short: "m3", ControlPlane: true},
		{Name: "worker-1", IP: "198.51.100.11", IP6: "2001:db8:100::11", PodCIDR: "10.244.1.0/24", PodCIDR6: "2001:db8:244:1::/64", short: "w1", Edge: true},
		{Name: "edge-a1", IP: siteNodeIP, IP6: siteNodeIP6, PodCIDR: "10.244.4.0/24", PodCIDR6: "2001:db8:244:4::/64", short: "ea", Edge: true, site: siteA},
		{Name: "edge-b1", IP: siteNodeIP, IP6: siteNodeIP6, PodCIDR: "10.244.5.0/24", PodCIDR6: "2001:db8:244:5::/64", short: "eb", Edge: true, site: siteB},
	}
	for _, n := range nodes {
		n.c, n.netns, n.dir = c, "yurtdns-"+n.Name, filepath.Join(c.dir, "nodes", n.Name)
		n.kubelet.start, n.yurthub.start = n.startKubeletOnce, n.startYurthubOnce
		n.setVersion(c.startVersion)
	}
	return nodes
}

// SiteNodes are the edge nodes behind a site's NAT router, one per site,
// with the same node address.
func (c *Cluster) SiteNodes() []*Node {
	var nodes []*Node
	for _, n := range c.Nodes {
		if n.site != nil {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// Site is the name of the node's edge site, empty for a node on the cloud's network.
func (n *Node) Site() string {
	if n.site == nil {
		return ""
	}
	return n.site.name
}

// Master is the first control-plane node, kubeadm init's, where
// yurt-tunnel-server and yurt-manager run.
func (c *Cluster) Master() *Node { return c.Nodes[0] }

// Node returns the node called name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.binDir, name) }

// versionDir holds the Kubernetes binaries of version: Bin itself for
// KubernetesVersion, else make k8s-prev's Bin/<version>/.
func (c *Cluster) versionDir(version string) string {
	if version == KubernetesVersion {
		return c.binDir
	}
	return filepath.Join(c.binDir, version)
}

func (c *Cluster) versionBin(version, name string) string {
	return filepath.Join(c.versionDir(version), name)
}

// Kubeadm is the path of version's kubeadm, the same on the machine and in
// the nodes (n.Run(ctx, c.Kubeadm(v), ...)).
func (c *Cluster) Kubeadm(version string) string { return c.versionBin(version, "kubeadm") }

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "[cluster] "+time.Now().Format("15:04:05.0")+" "+format+"\n", args...)
}

// overlaid are the directories each node sees through an overlay: the
// overlay's upper directory cannot lie inside its lower one.
var overlaid = []string{"/etc", "/var", "/opt", "/usr", "/run"}

// Start brings the cluster up: both nodes Ready, kube-proxy and CoreDNS
// answering through the kube-dns Service from each node.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the kubeadm cluster needs root (network and mount namespaces, cgroups)")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	for _, o := range overlaid {
		if dir == o || strings.HasPrefix(dir, o+"/") {
			return nil, fmt.Errorf("cluster directory %s lies under %s, which every node overlays: choose another", dir, o)
		}
	}
	c := &Cluster{dir: filepath.Join(dir, "live"), cacheDir: dir, binDir: cfg.Bin, startVersion: cfg.StartVersion, log: cfg.Log}
	if c.log == nil {
		c.log = io.Discard
	}
	if c.startVersion == "" {
		c.startVersion = KubernetesVersion
	}
	if _, err := os.Stat(c.Kubeadm(c.startVersion)); err != nil {
		return nil, fmt.Errorf("kubeadm %s: %w (make test-tools builds %s and %s)", c.startVersion, err, KubernetesVersion, PreviousKubernetesVersion)
	}
	c.Nodes, c.spare = newNodes(c), spareNode(c)
	started := time.Now()
	if err := c.teardown(); err != nil {
		return nil, fmt.Errorf("tearing down the cluster a killed run left: %w", err)
	}
	if err := checkSubnetFree(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "run"), 0o755); err != nil {
		return nil, err
	}
	if err := c.saveSysctls(); err != nil {
		return nil, err
	}
	if err := joinInstrumentsCgroup(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.keepLogs()
			c.Stop()
		}
	}()
	if err := c.up(ctx, cfg.Images); err != nil {
		return nil, err
	}
	c.logf("up at %s in %.1fs: %d nodes Ready, DNS answering", c.startVersion, time.Since(started).Seconds(), len(c.Nodes))
	return c, nil
}

func (c *Cluster) up(ctx context.Context, extraImages []string) error {
	if err := upBridge(); err != nil {
		return err
	}
	if err := c.startLoadBalancer(); err != nil {
		return fmt.Errorf("load balancer: %w", err)
	}
	for _, s := range c.sites {
		if err := s.up(); err != nil {
			return fmt.Errorf("site %s: %w", s.name, err)
		}
	}
	configs := map[*Node]string{}
	for _, n := range c.Nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return err
		}
		if err := upNodeNetwork(n, c.Nodes); err != nil {
			return err
		}
		if err := c.makeCgroups(n); err != nil {
			return err
		}
		if err := n.startAnchor(); err != nil {
			return err
		}
		path, err := c.kubeadmConfig(n)
		if err != nil {
			return err
		}
		configs[n] = path
	}
	for _, s := range c.sites {
		for _, p := range c.Nodes {
			if err := s.routePods(p); err != nil {
				return err
			}
		}
	}
	images, sandbox, err := c.kubeadmImages(configs[c.Master()])
	c.pause = sandbox
	if err != nil {
		return err
	}
	openyurt, err := c.openyurtImageArchives()
	if err != nil {
		return err
	}
	images = append(append(images, openyurt...), extraImages...)
	c.images = images
	errs := make(chan error, len(c.Nodes))
	for _, n := range c.Nodes {
		go func() { errs <- n.startRuntime(images, sandbox) }()
	}
	for range c.Nodes {
		if err := <-errs; err != nil {
			return err
		}
	}
	c.logf("containerd up and its images imported on each node (%d on a control-plane node)", len(images))
	for _, n := range c.Nodes {
		n.StartKubelet()
	}
	m := c.Master()
	if _, err := m.Run(ctx, c.Kubeadm(m.Version()), "init", "--config", configs[m], "--upload-certs", "-v=1"); err != nil {
		return fmt.Errorf("kubeadm init: %w", err)
	}
	c.Kubeconfig = filepath.Join(m.dir, "state", "etc_kubernetes", "admin.conf")
	c.logf("kubeadm init done")
	if err := c.dualStackKubeDNS(ctx); err != nil {
		return fmt.Errorf("kube-dns of both families: %w", err)
	}
	if err := c.startYurtManager(ctx); err != nil {
		return fmt.Errorf("yurt-manager: %w", err)
	}
	c.logf("yurt-manager up, NodePool %s made", EdgePool)
	// The control-plane nodes join one after another (each adds an etcd
	// member), the others beside them.
	join := func(n *Node) error {
		if _, err := n.Run(ctx, c.Kubeadm(n.Version()), "join", "--config", configs[n], "-v=1"); err != nil {
			return fmt.Errorf("kubeadm join %s: %w", n.Name, err)
		}
		if n.Edge {
			if err := n.putBehindYurthub(ctx); err != nil {
				return fmt.Errorf("yurthub on %s: %w", n.Name, err)
			}
		}
		c.logf("kubeadm join %s done%s", n.Name, map[bool]string{true: ", its kubelet behind yurthub"}[n.Edge]+map[bool]string{true: ", a control-plane node"}[n.ControlPlane])
		return nil
	}
	var joins errgroup.Group
	joins.Go(func() error {
		for _, n := range c.ControlPlanes()[1:] {
			if err := join(n); err != nil {
				return err
			}
		}
		return nil
	})
	for _, n := range c.Nodes {
		if !n.ControlPlane {
			joins.Go(func() error { return join(n) })
		}
	}
	if err := joins.Wait(); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	if err := c.startTunnel(ctx); err != nil {
		return fmt.Errorf("yurt-tunnel: %w", err)
	}
	c.logf("yurt-tunnel-server and yurt-tunnel-agent up")
	return nil
}

// dualStackKubeDNS gives kube-dns a ClusterIP of each family, as Kubernetes'
// own CoreDNS addon does (cluster/addons/dns/coredns): kubeadm makes it
// SingleStack, of the first family. kubeadm upgrade keeps that (its update
// names neither the policy nor the ClusterIPs, and the apiserver keeps the
// Service's).
func (c *Cluster) dualStackKubeDNS(ctx context.Context) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		dual := corev1.IPFamilyPolicyPreferDualStack
		svc.Spec.IPFamilyPolicy = &dual
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		svc.Spec.ClusterIPs = []string{kubeDNSIP, kubeDNSIP6}
		_, err = cs.CoreV1().Services("kube-system").Update(ctx, svc, metav1.UpdateOptions{})
		return err
	})
}

// waitReady waits for every node Ready, kube-proxy and CoreDNS rolled out,
// and a cluster name answered through the kube-dns Service on each node.
func (c *Cluster) waitReady(ctx context.Context) error {
	waits := [][]string{
		{"wait", "--for=condition=Ready", "node", "--all", "--timeout=180s"},
		{"-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=180s"},
		{"-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=180s"},
	}
	for _, w := range waits {
		if _, err := c.Kubectl(ctx, w...); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := n.WaitDNS(ctx, "kubernetes.default.svc.cluster.local", 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// WaitDNS waits until dig on the node gets name's address through the
// kube-dns Service.
func (n *Node) WaitDNS(ctx context.Context, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		r, err := n.Dig(ctx, KubeDNSIP(), name, "A")
		if err == nil && r.Status == "NOERROR" && len(r.Data("A")) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not answered through %s after %s: %v %s", n.Name, name, KubeDNSIP(), timeout, err, r.Raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Dig runs the real dig in the node's network namespace (one try, 2 s;
// extra dig options such as +time=5 override that).
func (n *Node) Dig(ctx context.Context, server, name, qtype string, extra ...string) (harness.DigResult, error) {
	return harness.DigWith(func(args ...string) ([]byte, error) {
		return n.NetCommand(ctx, "dig", args...).CombinedOutput()
	}, server, name, qtype, extra...)
}

// KubeDNSIP is the kube-dns Service's ClusterIP.
func KubeDNSIP() string { return kubeDNSIP }

// KubeDNSIP6 is the kube-dns Service's IPv6 ClusterIP.
func KubeDNSIP6() string { return kubeDNSIP6 }

// Kubectl runs kubectl with the admin kubeconfig.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin("kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+c.dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// RESTConfig is the admin's client configuration.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Clientset is a clientset with the admin's credentials.
func (c *Cluster) Clientset() (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// Dir is the cluster's live directory (logs: nodes/NAME/*.log).
func (c *Cluster) Dir() string { return c.dir }

// keepLogs copies the nodes' logs and their pods' logs to failed-start/ in
// the cluster directory, which teardown leaves: why a start failed.
func (c *Cluster) keepLogs() {
	dst := filepath.Join(c.cacheDir, "failed-start")
	os.RemoveAll(dst)
	for _, n := range c.machines() {
		files, _ := filepath.Glob(filepath.Join(n.dir, "*.log"))
		files = append(files, n.StateDir("var/log/pods"))
		os.MkdirAll(filepath.Join(dst, n.Name), 0o755)
		for _, f := range files {
			exec.Command("cp", "-rL", f, filepath.Join(dst, n.Name)).Run()
		}
	}
	c.logf("logs of the failed start kept in %s", dst)
}

// Stop tears the cluster down and puts back what it changed on the machine.
func (c *Cluster) Stop() error {
	for _, n := range c.Nodes {
		n.StopKubelet()
	}
	return c.teardown()
}

// teardown stops every process of the cluster by PID — the kubelets, the
// containers (the kubelets' cgroups), containerd and its shims and the
// hostNetwork containers (the node network namespaces), the namespace
// anchors — then removes the namespaces, the bridge, the cgroups and the
// state, restores the machine-wide kernel settings, and moves this process
// back out of the instruments' cgroup. It works from what
// is on the machine and in the directory, so it also cleans up after a
// killed run.
func (c *Cluster) teardown() error {
	boxes, links := c.netboxes()
	for _, f := range []string{"kubelet-", "containerd-", "stub-resolver-", "haproxy"} {
		matches, _ := filepath.Glob(filepath.Join(c.dir, "run", f+"*.pid"))
		for _, m := range matches {
			if data, err := os.ReadFile(m); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pidInClusterNetns(c, pid) {
					killPID(pid, 10*time.Second)
				}
			}
			os.Remove(m)
		}
	}
	for _, n := range c.machines() {
		for _, pid := range pidsInCgroup(filepath.Join("/sys/fs/cgroup/pids", n.cgroupName())) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, netns := range append(c.netnsNames(), boxes...) {
		for _, pid := range pidsInNetns(netns) {
			killPID(pid, 5*time.Second)
		}
	}
	var errs []error
	for _, n := range c.machines() {
		if err := removeCgroups(n.cgroupName()); err != nil {
			errs = append(errs, err)
		}
		if _, err := os.Stat("/run/netns/" + n.netns); err == nil {
			if err := ip("netns", "del", n.netns); err != nil {
				errs = append(errs, err)
			}
		}
		exec.Command("ip", "link", "del", "ydh-"+n.short).Run()
	}
	for _, netns := range boxes {
		if _, err := os.Stat("/run/netns/" + netns); err == nil {
			if err := ip("netns", "del", netns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, l := range links {
		exec.Command("ip", "link", "del", l).Run()
	}
	exec.Command("ip", "link", "del", bridgeName).Run()
	if err := c.restoreSysctls(); err != nil {
		errs = append(errs, err)
	}
	if err := leaveInstrumentsCgroup(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pidInClusterNetns guards a recorded PID against reuse by an unrelated
// process: only one in a node's network namespace is stopped.
func pidInClusterNetns(c *Cluster, pid int) bool {
	boxes, _ := c.netboxes()
	for _, netns := range append(c.netnsNames(), boxes...) {
		for _, p := range pidsInNetns(netns) {
			if p == pid {
				return true
			}
		}
	}
	return false
}

// netnsNames are the machines' network namespaces.
func (c *Cluster) netnsNames() []string {
	var names []string
	for _, n := range c.machines() {
		names = append(names, n.netns)
	}
	return names
}

// cgroupHierarchies are the machine's mounted cgroup hierarchies.
func cgroupHierarchies() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return dirs
}

// makeCgroups makes the node's kubelet cgroupRoot in every hierarchy, and
// its daemons' cgroup in the cpu one.
func (c *Cluster) makeCgroups(n *Node) error {
	for _, h := range cgroupHierarchies() {
		if err := os.MkdirAll(filepath.Join(h, n.cgroupName()), 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(n.daemonsCPUCgroup(), 0o755); err != nil {
		return err
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join("/sys/fs/cgroup/cpuset", n.cgroupName(), f), v, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// removeCgroups removes a cgroup subtree in every hierarchy, deepest first,
// retrying while the killed processes exit.
func removeCgroups(name string) error {
	hierarchies := cgroupHierarchies()
	var last error
	for range 50 {
		last = nil
		for _, h := range hierarchies {
			root := filepath.Join(h, name)
			var dirs []string
			filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
					last = fmt.Errorf("removing cgroup %s: %w", dirs[i], err)
				}
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

// machineSysctls are the kernel settings a kubelet changes that no
// namespace isolates.
var machineSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func (c *Cluster) sysctlFile() string { return filepath.Join(c.cacheDir, "sysctls.json") }

// saveSysctls records the machine's settings before any kubelet runs. A
// record left by a killed run was restored by teardown and is rewritten.
func (c *Cluster) saveSysctls() error {
	values, err := readMachineSysctls()
	if err != nil {
		return err
	}
	c.settingsBefore = values
	data, _ := json.Marshal(values)
	return os.WriteFile(c.sysctlFile(), data, 0o644)
}

func (c *Cluster) restoreSysctls() error {
	data, err := os.ReadFile(c.sysctlFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var values map[string]string
	if err := json.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("%s: %w", c.sysctlFile(), err)
	}
	for k, v := range values {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			return fmt.Errorf("restoring %s: %w", k, err)
		}
	}
	return os.Remove(c.sysctlFile())
}

// PauseImage is kubeadm's pause image, present on every node: a container
// that runs and does nothing, for stand-ins of workloads a test only edits.
func (c *Cluster) PauseImage() string { return c.pause }

// KubectlPath is the kubectl binary (use it with --kubeconfig Kubeconfig).
func (c *Cluster) KubectlPath() string { return c.bin("kubectl") }
