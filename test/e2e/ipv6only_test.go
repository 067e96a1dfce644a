package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIPv6OnlyCluster: on an apiserver whose one Service range is IPv6, the
// tunnel Service and the nodes have IPv6 addresses alone. The sync writes
// them and yurthosts answers AAAA, NODATA for A, and follows a change.
// (2001:db8::/32 addresses are never dialled: answers only.)
func TestIPv6OnlyCluster(t *testing.T) {
	cp := harness.Start(t, harness.Options{IPv6Only: true})
	svc := cp.CreateService(t, harness.TunnelService())
	if len(svc.Spec.ClusterIPs) != 1 || svc.Spec.IPFamilies[0] != corev1.IPv6Protocol {
		t.Fatalf("tunnel Service ClusterIPs %v, families %v: want one IPv6 address", svc.Spec.ClusterIPs, svc.Spec.IPFamilies)
	}
	tunnelIP := svc.Spec.ClusterIP
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "2001:db8:100::10", Ready: true})
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "2001:db8:100::21", Edge: true, Ready: true})
	harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, onlyYurthosts)

	expectRecords(t, syncBudget, cp, "2001:db8:100::10\tmaster-1", tunnelIP+"\tworker-1")
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "AAAA", tunnelIP)
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "A", "NODATA")
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "AAAA", "2001:db8:100::10")
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "A", "NODATA")

	// master-1 becomes an edge node: its name moves to the tunnel.
	ctx := context.Background()
	node, err := cp.Client.CoreV1().Nodes().Get(ctx, "master-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels[tunnelnodes.EdgeNodeLabel] = "true"
	if _, err := cp.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "AAAA", tunnelIP)
}

// TestInstallRevertIPv6Only: install's steps on a single-stack IPv6
// kubeadm cluster (kube-dns fd00:10:96::a, IPv6 pods and EndpointSlices).
// --node-local-dns --dry-run shows the caches on fd84:5bd1:ae3::10 alone.
// Every step applies and waits as on IPv4, status says all applied, and
// revert restores what kubeadm made.
func TestInstallRevertIPv6Only(t *testing.T) {
	t.Parallel()
	k := newKubeadmClusterOf(t, ipv6Cluster)
	k.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "2001:db8:100::21", Edge: true, Ready: true,
		Labels: map[string]string{"kubernetes.io/os": "linux"}})
	createYurthub(t, k.ControlPlane, "worker-1")
	original := k.snapshot(t)
	stop := k.PlayRolloutControllers(tunnelnodes.Namespace)
	defer stop()
	images := []string{"--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test"}
	ctx := context.Background()

	out, err := k.run(t, append([]string{"install", "--node-local-dns", "--dry-run"}, images...)...)
	if err != nil || !strings.Contains(out, "bind fd84:5bd1:ae3::10\n") || strings.Contains(out, "169.254.20.10") {
		t.Errorf("install --node-local-dns --dry-run on an IPv6-only cluster: the caches must bind fd84:5bd1:ae3::10 alone (%v):\n%s", err, out)
	}
	if _, err := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, engine.StateConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("install --dry-run left an install state: %v", err)
	}
	if changed := diffSnapshots(original, k.snapshot(t)); len(changed) > 0 {
		t.Errorf("install --dry-run changed %v", changed)
	}

	out, err = k.run(t, append([]string{"install"}, images...)...)
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	t.Logf("install:\n%s", out)
	if !strings.Contains(out, "[coredns-daemonset] DaemonSet coredns Ready on every Ready node and behind kube-dns") {
		t.Errorf("install did not see the DaemonSet's IPv6 pods behind kube-dns:\n%s", out)
	}
	if out, err := k.run(t, "status"); err != nil || !allApplied(out) {
		t.Errorf("status: %v\n%s", err, out)
	}
	svc, err := k.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil || svc.Annotations["openyurt.io/topologyKeys"] != "openyurt.io/nodepool" {
		t.Errorf("kube-dns after install: %v %v", svc.Annotations, err)
	}

	if out, err := k.run(t, "revert"); err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	if changed := diffSnapshots(original, k.snapshot(t)); len(changed) > 0 {
		t.Errorf("revert left %v changed", changed)
	}
}
