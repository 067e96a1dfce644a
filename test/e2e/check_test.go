package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os/exec"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/install/preflight"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// exitCheckFailed is check's exit code when a check fails.
const exitCheckFailed = 2

// The images check looks for: given, not this build's defaults.
const (
	checkCoreDNSImage = "docker.io/yurtdns/coredns-yurt:v0.0.0-e2e"
	checkSyncImage    = "docker.io/yurtdns/tunnel-nodes-sync:v0.0.0-e2e"
)

// checkArgs are check's flags against the cluster's images.
var checkArgs = []string{"--coredns-image", checkCoreDNSImage, "--sync-image", checkSyncImage}

// newCheckedCluster is a kubeadm cluster that passes every check: OpenYurt
// v1.7.0, yurt-tunnel-server on Recreate, master-1 and the edge node
// worker-1 with yurthub, both on containerd with install's images.
func newCheckedCluster(t *testing.T) *kubeadmCluster {
	k := newKubeadmCluster(t)
	ctx := context.Background()
	labels := map[string]string{"app.kubernetes.io/name": "yurt-manager"}
	ym := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "yurt-manager", Namespace: tunnelnodes.Namespace,
			Labels: map[string]string{"app.kubernetes.io/name": "yurt-manager", "app.kubernetes.io/version": "v1.7.0"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "yurt-manager", Image: "docker.io/openyurt/yurt-manager:v1.7.0"}}}}},
	}
	if _, err := k.Client.AppsV1().Deployments(tunnelnodes.Namespace).Create(ctx, ym, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setTunnelServerStrategy(t, k, appsv1.RecreateDeploymentStrategyType)
	k.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.1.21", Edge: true, Ready: true})
	createYurthub(t, k.ControlPlane, "worker-1")
	for _, n := range []string{"master-1", "worker-1"} {
		setKubeletStatus(t, k, n, checkCoreDNSImage, checkSyncImage)
	}
	return k
}

// setKubeletStatus reports, as a kubelet on containerd does, the images
// the node holds.
func setKubeletStatus(t *testing.T, k *kubeadmCluster, node string, images ...string) {
	t.Helper()
	ctx := context.Background()
	n, err := k.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.ContainerRuntimeVersion, n.Status.NodeInfo.KubeletVersion = "containerd://1.6.20", "v1.34.2"
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 320000}}
	for _, img := range images {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{img}, SizeBytes: 20 << 20})
	}
	if _, err := k.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func setTunnelServerStrategy(t *testing.T, k *kubeadmCluster, strategy appsv1.DeploymentStrategyType) {
	t.Helper()
	patch := `{"spec":{"strategy":{"type":"` + string(strategy) + `","rollingUpdate":null}}}`
	if _, err := k.Client.AppsV1().Deployments(tunnelnodes.Namespace).Patch(context.Background(), "yurt-tunnel-server", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// clusterVersions are the resourceVersions of what install touches, and of
// the nodes and kube-system's pods, which check reads.
func clusterVersions(t *testing.T, k *kubeadmCluster) map[string]string {
	t.Helper()
	ctx := context.Background()
	rv := k.resourceVersions(t)
	nodes, err := k.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		rv["node/"+n.Name] = n.ResourceVersion
	}
	pods, err := k.Client.CoreV1().Pods(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		rv["pod/"+p.Name] = p.ResourceVersion
	}
	return rv
}

// checkJSON runs check -o json and returns its report, exit code and
// output.
func checkJSON(t *testing.T, kubeconfig string, args ...string) (preflight.Report, int, string) {
	t.Helper()
	cmd := exec.Command(harness.Binary(t, "tunnel-nodes-sync"), append([]string{"check", "-o", "json", "--kubeconfig", kubeconfig, "--timeout", "20s"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	code := exitCode(t, err)
	var r preflight.Report
	// Stdout holds the document alone; the line saying what failed is on stderr.
	if err := json.Unmarshal(stdout, &r); err != nil {
		t.Fatalf("check -o json (exit %d): stdout is not the report: %v\n%s%s", code, err, stdout, stderr.String())
	}
	return r, code, string(stdout) + stderr.String()
}

// TestCheckPasses: on a cluster that meets every prerequisite check prints
// a ✔ line per check and exits 0, as install --check does; -o json is the
// report; nothing is written.
func TestCheckPasses(t *testing.T) {
	t.Parallel()
	k := newCheckedCluster(t)
	before := clusterVersions(t, k)

	out, err := runSync(t, k.ControlPlane, append([]string{"check"}, checkArgs...)...)
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("check: exit %d, want 0\n%s", code, out)
	}
	for _, want := range []string{
		"✔ profile: the cluster has the objects of --profile yurt-tunnel\n",
		"✔ container-runtime: containerd on every node (2)\n",
		"✔ openyurt: OpenYurt v1.7.0 (the label app.kubernetes.io/version of Deployment kube-system/yurt-manager); install leaves kube-controller-manager's node lifecycle controller on",
		"✔ control-planes-alike: one control-plane node (master-1): nothing to compare\n",
		"✔ yurthub: yurthub on every edge node (1)\n",
		"✔ tunnel-service: Service kube-system/x-tunnel-server-internal-svc, ClusterIP 10.96.0.9\n",
		"✔ tunnel-server-strategy: Deployment kube-system/yurt-tunnel-server has strategy Recreate\n",
		"✔ edge-kubelet-watch-list: no edge kubelet 1.35.0 or later\n",
		"✔ images: " + checkCoreDNSImage + " and " + checkSyncImage + " on every node (2)\n",
		"✔ kubeadm-dns: Service kube-system/kube-dns, Deployment and ConfigMap kube-system/coredns\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "✖⚠") {
		t.Errorf("check warns or fails:\n%s", out)
	}

	r, code, out := checkJSON(t, k.Kubeconfig, checkArgs...)
	if code != 0 || r.Profile != layout.YurtTunnel || r.Result != preflight.Pass || len(r.Checks) != 10 {
		t.Errorf("check -o json: exit %d, %+v\n%s", code, r, out)
	}

	out, err = k.run(t, append([]string{"install", "--check"}, checkArgs...)...)
	if code := exitCode(t, err); code != 0 || !strings.Contains(out, "✔ images: ") || strings.Contains(out, "[records]") {
		t.Errorf("install --check: exit %d, want 0, the check's lines and no step\n%s", code, out)
	}
	if after := clusterVersions(t, k); !maps.Equal(before, after) {
		t.Errorf("check wrote to the cluster: resourceVersions %v, then %v", before, after)
	}
}

// TestCheckFails: a tunnel server on RollingUpdate, an edge node without
// yurthub and a node without install's images each fail with what to do;
// exit 2, in text, json and install --check; nothing is written.
func TestCheckFails(t *testing.T) {
	t.Parallel()
	k := newCheckedCluster(t)
	setTunnelServerStrategy(t, k, appsv1.RollingUpdateDeploymentStrategyType)
	k.CreateNode(t, harness.Node{Name: "worker-2", InternalIP: "192.168.1.22", Edge: true, Ready: true})
	setKubeletStatus(t, k, "worker-2", checkCoreDNSImage)
	before := clusterVersions(t, k)

	wantLines := []string{
		"✖ yurthub: no yurthub on edge node(s) worker-2 (no mirror pod kube-system/yurt-hub-<node>, not in a NodePool) — run yurthub there (yurtadm join, or yurthub's static pod)",
		"✖ tunnel-server-strategy: Deployment kube-system/yurt-tunnel-server has strategy RollingUpdate: its hostNetwork pod cannot start beside the old one, and install stops at tunnel-dns — " +
			`kubectl -n kube-system patch deployment yurt-tunnel-server --type=merge -p '{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}' (or install --skip tunnel-dns)`,
		"✖ images: " + checkSyncImage + " missing on worker-2 — on each such node: ctr -n k8s.io images import --all-platforms tunnel-nodes-sync.oci.tar",
		"✔ container-runtime: containerd on every node (3)\n",
		"3 of 10 checks failed: yurthub, tunnel-server-strategy, images\n",
	}
	out, err := runSync(t, k.ControlPlane, append([]string{"check"}, checkArgs...)...)
	if code := exitCode(t, err); code != exitCheckFailed {
		t.Errorf("check: exit %d, want 2\n%s", code, out)
	}
	out2, err := k.run(t, append([]string{"install", "--check"}, checkArgs...)...)
	if code := exitCode(t, err); code != exitCheckFailed {
		t.Errorf("install --check: exit %d, want 2\n%s", code, out2)
	}
	for _, want := range wantLines {
		if !strings.Contains(out, want) || !strings.Contains(out2, want) {
			t.Errorf("check or install --check lacks %q:\ncheck:\n%s\ninstall --check:\n%s", want, out, out2)
		}
	}

	r, code, out := checkJSON(t, k.Kubeconfig, checkArgs...)
	if code != exitCheckFailed || r.Result != preflight.Fail {
		t.Errorf("check -o json: exit %d, result %s\n%s", code, r.Result, out)
	}
	failed := map[string]preflight.Result{}
	for _, c := range r.Checks {
		if c.Outcome == preflight.Fail {
			failed[c.Name] = c
		}
	}
	for name, nodes := range map[string]string{"yurthub": "worker-2", "tunnel-server-strategy": "", "images": "worker-2"} {
		if c, ok := failed[name]; !ok || c.Action == "" || strings.Join(c.Nodes, ",") != nodes {
			t.Errorf("check -o json: %s is %+v, want failed with an action, nodes %s", name, c, nodes)
		}
	}
	if len(failed) != 3 {
		t.Errorf("check -o json: failed %v, want yurthub, tunnel-server-strategy and images", failed)
	}
	if after := clusterVersions(t, k); !maps.Equal(before, after) {
		t.Errorf("check wrote to the cluster: resourceVersions %v, then %v", before, after)
	}
}

// TestCheckProfileFromInstallState: after install --profile raven, check
// runs Raven's checks without --profile, and refuses another one, as
// status does.
func TestCheckProfileFromInstallState(t *testing.T) {
	t.Parallel()
	cp := newRavenCluster(t)
	if out, err := runSync(t, cp, "install", "--profile", "raven", "--skip=raven-rbac,raven-corefile,raven-proxy-dns,gateway-dns,raven-sync"); err != nil {
		t.Fatalf("install --profile raven: %v\n%s", err, out)
	}
	r, code, out := checkJSON(t, cp.Kubeconfig, checkArgs...)
	names := make([]string, 0, len(r.Checks))
	for _, c := range r.Checks {
		names = append(names, c.Name)
	}
	// The harness's nodes report no runtime and no images.
	if code != exitCheckFailed || r.Profile != layout.Raven || strings.Join(names, ",") != "profile,container-runtime,openyurt,yurthub,tunnel-service,edge-kubelet-watch-list,images" ||
		r.Checks[4].Outcome != preflight.Pass || !strings.Contains(r.Checks[4].Found, tunnelnodes.RavenServiceName) {
		t.Errorf("check without --profile: exit %d, %+v\n%s", code, r, out)
	}
	out, err := runSync(t, cp, "check", "--profile", "yurt-tunnel")
	if exitCode(t, err) != exitError || !strings.Contains(out, "--profile yurt-tunnel: the install state (ConfigMap kube-system/yurtdns-install-state) records --profile raven") {
		t.Errorf("check --profile yurt-tunnel: %v\n%s", err, out)
	}
}
