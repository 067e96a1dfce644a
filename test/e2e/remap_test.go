package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// yurthostsThenKubernetes is onlyYurthosts followed by the kubernetes
// plugin, which answers the PTR queries yurthosts hands on: the tunnel
// Service's name for its current ClusterIP, NXDOMAIN for any other address.
var yurthostsThenKubernetes = strings.TrimSuffix(onlyYurthosts, "}\n") + `    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}}
    }
}
`

// annotated marks records as rendered for the tunnel ClusterIPs ips, as
// tunnel-nodes-sync writes them.
func annotated(cm *corev1.ConfigMap, ips string) *corev1.ConfigMap {
	cm.Annotations = map[string]string{tunnelnodes.TunnelClusterIPsAnnotation: ips}
	return cm
}

// TestRemapIsStateless: the records were written by the sync for the tunnel
// Service's ClusterIP; the sync stops; the Service is recreated with a new
// ClusterIP; a second coredns-yurt starts only now. Both the process that
// watched the old ClusterIP and the one that never saw it answer every edge
// name with the new ClusterIP, and neither answers the old or the new one in
// reverse.
func TestRemapIsStateless(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	edges := []string{"worker-1", "worker-2", "edge-node-1"}
	for i, name := range edges {
		cp.CreateNode(t, harness.Node{Name: name, InternalIP: fmt.Sprintf("192.168.0.%d", 21+i), Edge: true})
	}
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "192.168.0.10"})

	sync := harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")
	written := []string{"10.96.0.9\tedge-node-1", "10.96.0.9\tworker-1", "10.96.0.9\tworker-2", "192.168.0.10\tmaster-1"}
	expectRecords(t, syncBudget, cp, written...)
	cm, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Annotations[tunnelnodes.TunnelClusterIPsAnnotation]; got != "10.96.0.9" {
		t.Fatalf("%s = %q, want the ClusterIP the records were rendered for", tunnelnodes.TunnelClusterIPsAnnotation, got)
	}
	first := harness.StartCoreDNS(t, cp.Kubeconfig, yurthostsThenKubernetes)
	expectAnswer(t, answerBudget, first.DNSAddr, "worker-1", "A", "10.96.0.9")
	sync.Stop()

	cp.DeleteService(t, tunnelnodes.Namespace, tunnelnodes.ServiceName)
	svc := cp.CreateService(t, harness.TunnelService("10.96.0.77"))
	second := harness.StartCoreDNS(t, cp.Kubeconfig, yurthostsThenKubernetes)

	serviceName := svc.Name + "." + svc.Namespace + ".svc.cluster.local."
	for _, p := range []struct {
		name string
		dns  *harness.CoreDNS
	}{{"watched the old ClusterIP", first}, {"started after the recreation", second}} {
		t.Run(p.name, func(t *testing.T) {
			for _, name := range edges {
				expectAnswer(t, answerBudget, p.dns.DNSAddr, name, "A", "10.96.0.77")
			}
			expectAnswer(t, answerBudget, p.dns.DNSAddr, "master-1", "A", "192.168.0.10")
			// Answers from kubernetes, not edge names from yurthosts.
			expectAnswer(t, answerBudget, p.dns.DNSAddr, "77.0.96.10.in-addr.arpa.", "PTR", serviceName)
			expectAnswer(t, answerBudget, p.dns.DNSAddr, "9.0.96.10.in-addr.arpa.", "PTR", "NXDOMAIN")
			expectAnswer(t, answerBudget, p.dns.DNSAddr, "10.0.168.192.in-addr.arpa.", "PTR", "master-1.")
		})
	}
	// The records still name the old ClusterIP: the answers come from the
	// remap, not from a rewrite.
	if got := records(t, cp, tunnelnodes.ConfigMapName); got != strings.Join(written, "\n") {
		t.Errorf("records changed with the sync stopped:\n%s", got)
	}
}
