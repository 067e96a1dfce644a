package cluster

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/image"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The cluster is an OpenYurt v1.7.0 cluster, made as `yurtadm join` and the
// charts make one (docs/openyurt-v1.7.md §6): yurt-manager on master-1 with
// its chart's controllers, worker-1 an edge node of NodePool EdgePool whose
// kubelet reaches the apiserver only through yurthub, and yurt-tunnel-server
// on master-1 with yurt-tunnel-agent on the edge nodes.
const (
	OpenYurtVersion = "v1.7.0"
	// EdgePool is the NodePool of the edge nodes.
	EdgePool = "edge-pool"
	// NodePoolLabel is the label yurtadm join gives a node of a pool.
	NodePoolLabel = "apps.openyurt.io/nodepool"
	// yurthubAddress is where yurthub serves on an edge node: its default
	// dummy-interface address, on lo here (the test kernel has no dummy
	// links), so pods reach it as they reach a dummy interface's.
	yurthubAddress = "169.254.2.1"
)

var (
	//go:embed openyurt-manager.yaml
	yurtManagerManifest string
	//go:embed openyurt-tunnel.yaml
	tunnelManifest string
)

// openyurtImages are the images of OpenYurt's Kubernetes-run parts (yurthub
// runs as a node service, as yurtadm v1.7 installs it).
var openyurtImages = []string{"yurt-manager", "yurt-tunnel-server", "yurt-tunnel-agent"}

// openyurtImageArchives writes an archive for each OpenYurt image from the
// binaries make openyurt built, with the project's image code, as upstream's
// images run them (root, /usr/local/bin).
func (c *Cluster) openyurtImageArchives() ([]string, error) {
	var archives []string
	for _, name := range openyurtImages {
		bin := c.bin(name)
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("%w: make openyurt builds it", err)
		}
		archive, err := c.imageArchive("docker.io/openyurt/"+name+":"+OpenYurtVersion,
			image.Spec{Binary: bin, Entrypoint: "/usr/local/bin/" + name, User: "0:0", CACertificates: "/etc/ssl/certs/ca-certificates.crt"})
		if err != nil {
			return nil, err
		}
		archives = append(archives, archive)
	}
	return archives, nil
}

// chartFile is a file make openyurt copied from openyurt's yurt-manager
// and yurthub charts, its release namespace kube-system.
func (c *Cluster) chartFile(name string) (string, error) {
	data, err := os.ReadFile(filepath.Join(c.binDir, "openyurt-chart", name))
	if err != nil {
		return "", fmt.Errorf("%w: make openyurt copies it", err)
	}
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "{{- include") {
			continue // the chart's common labels
		}
		kept = append(kept, line)
	}
	text := strings.NewReplacer("{{ .Release.Namespace }}", "kube-system", "{{ .Values.cacheAgents | quote }}", `""`).Replace(strings.Join(kept, "\n"))
	path := filepath.Join(c.dir, "openyurt-"+name)
	return path, os.WriteFile(path, []byte(text), 0o644)
}

// applyText applies a manifest the cluster wrote.
func (c *Cluster) applyText(ctx context.Context, name, text string) error {
	path := filepath.Join(c.dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return err
	}
	_, err := c.Kubectl(ctx, "apply", "-f", path)
	return err
}

// startYurtManager installs yurt-manager as its chart does — every CRD
// (a missing one makes it exit), the controllers' RBAC, the webhook objects
// it fills in — waits until its webhooks serve, and makes the edge NodePool,
// which its fail-closed webhook must admit before an edge node joins.
func (c *Cluster) startYurtManager(ctx context.Context) error {
	// yurt-manager picks the CSR API version once, from discovery through
	// the kubernetes Service: asked before kube-proxy programs it, it falls
	// back to v1beta1, approves nothing, and exits 2 minutes later.
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=180s"); err != nil {
		return err
	}
	if err := c.retry(ctx, 60*time.Second, "the kubernetes Service reachable from "+c.Master().Name, func() error {
		_, err := c.Master().Run(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+kubernetesServiceIP+"/443")
		return err
	}); err != nil {
		return err
	}
	// Server-side: the platformadmins CRD is larger than client-side apply's
	// last-applied annotation may be.
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(c.binDir, "openyurt-chart", "crds")); err != nil {
		return err
	}
	// kubectl wait fails outright on a CRD without conditions yet.
	if err := c.retry(ctx, 60*time.Second, "CRDs established", func() error {
		_, err := c.Kubectl(ctx, "wait", "--for=condition=Established", "crd", "--all", "--timeout=10s")
		return err
	}); err != nil {
		return err
	}
	for _, f := range []string{"yurt-manager-auto-generated.yaml", "yurthub-cfg.yaml"} {
		path, err := c.chartFile(f)
		if err != nil {
			return err
		}
		if _, err := c.Kubectl(ctx, "apply", "-f", path); err != nil {
			return err
		}
	}
	if err := c.applyText(ctx, "openyurt-manager.yaml", yurtManagerManifest); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "deployment/yurt-manager", "--timeout=180s"); err != nil {
		return err
	}
	// yurt-manager writes its CA into the webhook configurations once its
	// certificate is made: until then no webhook call succeeds.
	pool := fmt.Sprintf(`{"apiVersion":"apps.openyurt.io/v1beta2","kind":"NodePool","metadata":{"name":%q},"spec":{"type":"Edge"}}`, EdgePool)
	return c.retry(ctx, 90*time.Second, "NodePool "+EdgePool+" (yurt-manager's webhooks)", func() error {
		return c.applyText(ctx, "nodepool.json", pool)
	})
}

// startTunnel runs yurt-tunnel-server behind x-tunnel-server-internal-svc on
// master-1 and yurt-tunnel-agent on the edge nodes, and waits until both
// run (their certificates signed: yurt-manager approves the CSRs).
func (c *Cluster) startTunnel(ctx context.Context) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Services(tunnelnodes.Namespace).Create(ctx, TunnelService(), metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := c.applyText(ctx, "openyurt-tunnel.yaml", strings.ReplaceAll(tunnelManifest, "{{masterIP}}", c.Master().IP)); err != nil {
		return err
	}
	for _, w := range []string{"deployment/yurt-tunnel-server", "daemonset/yurt-tunnel-agent"} {
		if _, err := c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", w, "--timeout=180s"); err != nil {
			return err
		}
	}
	c.waitTunnelPath(ctx)
	return nil
}

// waitTunnelPath waits until kubectl logs of the agent on worker-1 works
// (the sites' nodes are out of the apiserver's reach until install). Once in seven runs here every request through
// the tunnel was refused by the kubelet (401) for the cluster's whole life;
// a new yurt-tunnel-server pod is made once if so. It only logs when the
// path never works: the tests that use it say what fails.
func (c *Cluster) waitTunnelPath(ctx context.Context) {
	start, restarted := time.Now(), false
	var err error
	for time.Since(start) < 3*time.Minute {
		var pod string
		if pod, err = c.Kubectl(ctx, "-n", "kube-system", "get", "pods", "-l", "k8s-app=yurt-tunnel-agent", "--field-selector", "spec.nodeName=worker-1", "-o", "name"); err == nil {
			if _, err = c.Kubectl(ctx, "-n", "kube-system", "logs", strings.TrimSpace(pod), "--tail=1"); err == nil {
				return
			}
		}
		if !restarted && time.Since(start) > time.Minute {
			c.logf("kubectl logs through the tunnel still fails after 1m (%v): a new yurt-tunnel-server pod", err)
			c.Kubectl(ctx, "-n", "kube-system", "delete", "pod", "-l", labels.FormatLabels(tunnelServerSelector), "--wait=true")
			c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "deployment/yurt-tunnel-server", "--timeout=180s")
			restarted = true
		}
		time.Sleep(2 * time.Second)
	}
	c.logf("warning: kubectl logs through the tunnel never worked: %v", err)
}

// tunnelServerSelector selects yurt-tunnel-server's pod (openyurt-tunnel.yaml).
var tunnelServerSelector = map[string]string{"k8s-app": "yurt-tunnel-server"}

// TunnelService is yurt-tunnel-server's internal Service as its chart made
// it (10250 → 10263, 10255 → 10264), with the label the server's Service
// informer selects by, and a ClusterIP of each family (the chart's is
// SingleStack: an edge node's name then has no IPv6 address).
func TunnelService() *corev1.Service {
	dual := corev1.IPFamilyPolicyPreferDualStack
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.ServiceName, Namespace: tunnelnodes.Namespace, Labels: map[string]string{"name": "yurt-tunnel-server"}},
		Spec: corev1.ServiceSpec{Selector: tunnelServerSelector, IPFamilyPolicy: &dual, Ports: []corev1.ServicePort{
			{Name: "https", Port: 10250, TargetPort: intstr.FromInt32(tunnelnodes.DefaultHTTPSTargetPort), Protocol: corev1.ProtocolTCP},
			{Name: "http", Port: 10255, TargetPort: intstr.FromInt32(tunnelnodes.DefaultHTTPTargetPort), Protocol: corev1.ProtocolTCP},
		}},
	}
}

// startYurthubOnce starts yurthub on the node as yurtadm join's systemd unit
// does (pkg/yurtadm/constants YurtHubUnitConfig), in kubeletcertificate mode
// (it uses the certificate kubeadm join left for the kubelet), with its
// pod-facing address on lo instead of a dummy interface.
func (n *Node) startYurthubOnce() (*process, error) {
	return n.startDaemon("yurthub", n.c.bin("yurthub"),
		"--node-name="+n.objectName(), "--nodepool-name="+EdgePool, "--server-addr="+apiServerURL,
		"--bootstrap-mode=kubeletcertificate", "--bind-address=127.0.0.1", "--working-mode=edge",
		"--namespace=kube-system", "--node-ip="+n.IP,
		"--enable-dummy-if=false", "--bind-proxy-address="+yurthubAddress, "--v=2")
}

// kubeletThroughYurthub is yurtadm's kubeconfig for the kubelet
// (KubeletConfForNode): yurthub's plain proxy, no credentials of its own.
const kubeletThroughYurthub = `apiVersion: v1
clusters:
- cluster:
    server: http://%s:10261
  name: default-cluster
contexts:
- context:
    cluster: default-cluster
    namespace: default
    user: default-auth
  name: default-context
current-context: default-context
kind: Config
preferences: {}
`

// putBehindYurthub starts yurthub on the edge node, waits until it is
// ready, and points the kubelet at it as node-servant does
// (RedirectTrafficToYurtHub): its kubeconfig, appended to kubeadm's flags,
// and a restart.
func (n *Node) putBehindYurthub(ctx context.Context) error {
	// "replace": a machine joined again has it already.
	if err := ip("-n", n.netns, "addr", "replace", yurthubAddress+"/32", "dev", "lo", "scope", "host"); err != nil {
		return err
	}
	n.yurthub.Start()
	// Its serving certificate waits for yurt-manager's CSR approver.
	if err := n.c.retry(ctx, 240*time.Second, "yurthub on "+n.Name+" ready", func() error {
		out, err := n.YurthubGet(ctx, "/v1/readyz")
		if err == nil && out != "OK" {
			err = fmt.Errorf("readyz: %q", out)
		}
		return err
	}); err != nil {
		return fmt.Errorf("%w (see %s)", err, filepath.Join(n.dir, "yurthub.log"))
	}
	if err := os.WriteFile(filepath.Join(n.StateDir("var/lib/openyurt"), "kubelet.conf"), []byte(fmt.Sprintf(kubeletThroughYurthub, yurthubAddress)), 0o644); err != nil {
		return err
	}
	flags := filepath.Join(n.StateDir("var/lib/kubelet"), "kubeadm-flags.env")
	env, err := os.ReadFile(flags)
	if err != nil {
		return err
	}
	redirected := strings.Replace(string(env), `KUBELET_KUBEADM_ARGS="`, `KUBELET_KUBEADM_ARGS=" --kubeconfig=/var/lib/openyurt/kubelet.conf --bootstrap-kubeconfig= `, 1)
	if err := os.WriteFile(flags, []byte(redirected), 0o644); err != nil {
		return err
	}
	n.StopKubelet()
	n.StartKubelet()
	return nil
}

// YurthubGet GETs path from yurthub's health and metrics server, which
// listens on the node's loopback only (bash's /dev/tcp: the node has no curl).
func (n *Node) YurthubGet(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := n.Run(ctx, "bash", "-c", `exec 3<>/dev/tcp/127.0.0.1/10267 && printf 'GET %s HTTP/1.0\r\n\r\n' "$1" >&3 && cat <&3`, "get", path)
	if err != nil {
		return "", err
	}
	head, body, _ := strings.Cut(out, "\r\n\r\n")
	if status, _, _ := strings.Cut(head, "\r\n"); !strings.Contains(status, " 200 ") {
		return body, fmt.Errorf("GET %s: %s", path, status)
	}
	return strings.TrimSpace(body), nil
}

// ThroughYurthub says whether the node's kubelet talks to the apiserver
// through yurthub: the flags it runs with name yurthub's kubeconfig.
func (n *Node) ThroughYurthub() bool {
	env, _ := os.ReadFile(filepath.Join(n.StateDir("var/lib/kubelet"), "kubeadm-flags.env"))
	for _, f := range kubeadmFlags(string(env)) {
		if f == "--kubeconfig=/var/lib/openyurt/kubelet.conf" {
			return true
		}
	}
	return false
}

// StopYurthub stops the node's yurthub service.
func (n *Node) StopYurthub() { n.yurthub.Stop() }

// retry calls f until it succeeds or timeout passes.
func (c *Cluster) retry(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
