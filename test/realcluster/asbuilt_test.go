package realcluster

import (
	"slices"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/test/cluster"
)

// TestClusterAsBuilt checks, first and before any install, what the tests
// built on the cluster rely on: worker-1 an edge node of the edge pool whose
// kubelet goes through a ready yurthub of OpenYurt v1.7.0, yurt-tunnel-server's
// DNS controller writing the records (no sync yet), both address families
// on every node and through kube-dns, and kube-dns forwarding to each node's
// stub resolver. TestMain checks that the teardown leaves nothing behind.
func TestClusterAsBuilt(t *testing.T) {
	ctx := t.Context()
	out, err := kc.Kubectl(ctx, "get", "nodes", "-o", "wide", "--show-labels")
	t.Log(out)
	if err != nil {
		t.Error(err)
	}
	if !strings.Contains(out, "openyurt.io/is-edge-worker=true,") && !strings.Contains(out, cluster.NodePoolLabel+"="+cluster.EdgePool) {
		t.Error("worker-1 is not labelled as an edge node of the edge pool")
	}
	worker := kc.Node("worker-1")
	if !worker.ThroughYurthub() {
		t.Error("worker-1's kubelet does not run with yurthub's kubeconfig")
	}
	if ready, err := worker.YurthubGet(ctx, "/v1/readyz"); err != nil || ready != "OK" {
		t.Errorf("yurthub on worker-1: readyz %q, %v", ready, err)
	}
	if metrics, err := worker.YurthubGet(ctx, "/metrics"); err != nil || !strings.Contains(metrics, `git_version="v1.7.0"`) {
		t.Errorf("yurthub on worker-1 is not OpenYurt v1.7.0: %v", err)
	}
	writes, err := kc.ConfigMapWrites("yurt-tunnel-nodes", startedAt)
	if err != nil || writes["system:serviceaccount:kube-system:yurt-tunnel-server"] == 0 {
		t.Errorf("yurt-tunnel-server's DNS controller did not write yurt-tunnel-nodes: %v %v", writes, err)
	}
	// Dual-stack: every node has an address of each family, and the IPv6
	// Service path works (kube-proxy's ip6tables DNAT to a CoreDNS pod's
	// IPv6 address) from every node, as the IPv4 one does.
	for _, n := range kc.Nodes {
		out, err := kc.Kubectl(ctx, "get", "node", n.Name, "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`)
		if err != nil || out != n.IP+" "+n.IP6 {
			t.Errorf("%s's InternalIPs: %q (%v), want %s and %s", n.Name, out, err, n.IP, n.IP6)
		}
		r, err := n.Dig(ctx, cluster.KubeDNSIP6(), "kube-dns.kube-system.svc.cluster.local", "AAAA")
		if err != nil || !slices.Equal(r.Data("AAAA"), []string{cluster.KubeDNSIP6()}) {
			t.Errorf("%s: AAAA kube-dns through %s = %v %s", n.Name, cluster.KubeDNSIP6(), err, r.Raw)
		}
	}
	// The cloud's kube-proxies: the apiserver cannot reach the sites'
	// kubelets before install.
	for _, n := range kc.ControlPlanes() {
		pod, err := kc.Kubectl(ctx, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-proxy", "--field-selector", "spec.nodeName="+n.Name, "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		if out, err := kc.Kubectl(ctx, "-n", "kube-system", "logs", strings.TrimSpace(pod), "--tail=-1"); err != nil || strings.Contains(out, "single-stack") || !strings.Contains(out, "dual-stack") {
			t.Errorf("kube-proxy on %s does not run dual-stack (%v):\n%s", n.Name, err, out)
		}
	}
	for _, n := range kc.Nodes {
		// kubeadm's Corefile forwards there, and it never leaves the machine.
		if r, err := n.Dig(ctx, cluster.KubeDNSIP(), "example.org", "A"); err != nil || r.Status != "NXDOMAIN" {
			t.Errorf("%s: example.org through kube-dns = %v %s; want NXDOMAIN from the node's stub resolver", n.Name, err, r.Raw)
		}
	}
	t.Run("three control-plane nodes behind the load balancer, two sites with one address", checkControlPlaneAsBuilt)
	out, _ = kc.Kubectl(ctx, "get", "pods", "-A", "-o", "wide")
	t.Log(out)
}
