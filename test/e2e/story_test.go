package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSyncThenDig runs both binaries together: node changes in the API show
// up in dig within a second, and yurthosts measures the end-to-end
// programming latency from the sync's trigger-time annotation.
func TestSyncThenDig(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "192.168.0.10"})
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, onlyYurthosts)

	expectAnswer(t, dns.DNSAddr, "worker-1", "A", "10.96.0.9")
	expectAnswer(t, dns.DNSAddr, "master-1", "A", "192.168.0.10")

	start := time.Now()
	cp.CreateNode(t, harness.Node{Name: "worker-2", InternalIP: "192.168.0.22", Edge: true})
	expectAnswer(t, dns.DNSAddr, "worker-2", "A", "10.96.0.9")
	t.Logf("node created → dig answers in %s", time.Since(start))

	if err := cp.Client.CoreV1().Nodes().Delete(ctx, "worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, dns.DNSAddr, "worker-1", "A", "NXDOMAIN")

	sample := fmt.Sprintf(`coredns_yurthosts_programming_duration_seconds_count{configmap="%s/%s"}`, tunnelnodes.Namespace, tunnelnodes.ConfigMapName)
	if n := harness.Metric(t, dns.MetricsURL, sample); n < 2 {
		t.Errorf("%s = %v, want one observation per sync write (>= 2)", sample, n)
	}
	sum := harness.Metric(t, dns.MetricsURL, fmt.Sprintf(`coredns_yurthosts_programming_duration_seconds_sum{configmap="%s/%s"}`, tunnelnodes.Namespace, tunnelnodes.ConfigMapName))
	if sum <= 0 || sum > 2 {
		t.Errorf("programming duration sum %vs: want a positive sub-second latency per change", sum)
	}
}
