package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
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

	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "A", "10.96.0.9")
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "A", "192.168.0.10")

	start := time.Now()
	cp.CreateNode(t, harness.Node{Name: "worker-2", InternalIP: "192.168.0.22", Edge: true})
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-2", "A", "10.96.0.9")
	t.Logf("node created → dig answers in %s", time.Since(start))

	if err := cp.Client.CoreV1().Nodes().Delete(ctx, "worker-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "A", "NXDOMAIN")

	sample := fmt.Sprintf(`coredns_yurthosts_programming_duration_seconds_count{configmap="%s/%s"}`, tunnelnodes.Namespace, tunnelnodes.ConfigMapName)
	if n := harness.Metric(t, dns.MetricsURL, sample); n < 2 {
		t.Errorf("%s = %v, want one observation per sync write (>= 2)", sample, n)
	}
	sum := harness.Metric(t, dns.MetricsURL, fmt.Sprintf(`coredns_yurthosts_programming_duration_seconds_sum{configmap="%s/%s"}`, tunnelnodes.Namespace, tunnelnodes.ConfigMapName))
	if sum <= 0 || sum > 2 {
		t.Errorf("programming duration sum %vs: want a positive sub-second latency per change", sum)
	}
}

// storyBudget is the budget for an answer to follow a change.
const storyBudget = time.Second

// localCorefile turns the Corefile install wrote into the coredns ConfigMap
// into one that runs here: loopback ports and the harness kubeconfig. The
// cache block goes: in a cluster it holds an answer for up to the record's
// TTL (yurthosts' ttl, 5 s by default), and this test times yurthosts. The
// upstream forward is replaced by a local root zone (this machine has no
// upstream), so names nobody knows get a prompt NXDOMAIN.
func localCorefile(t *testing.T, installed string) string {
	zone := filepath.Join(t.TempDir(), "root.zone")
	if err := os.WriteFile(zone, []byte(". 3600 IN SOA ns. hostmaster. 1 7200 3600 1209600 3600\n. 3600 IN NS ns.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	installed = regexp.MustCompile(`(?m)^\s*cache 30 \{[^}]*\}\n`).ReplaceAllString(installed, "")
	installed = regexp.MustCompile(`(?m)^(\s*)forward \. /etc/resolv\.conf \{[^}]*\}\n`).ReplaceAllString(installed, "${1}file "+zone+" .\n")
	return strings.NewReplacer(
		".:53 {", ".:{{.DNSPort}} {\n    bind 127.0.0.1",
		"health {", "health {{.HealthAddr}} {",
		"ready\n", "ready {{.ReadyAddr}}\n",
		"prometheus :9153", "prometheus {{.MetricsAddr}}",
		"yurthosts {", "yurthosts {\n        kubeconfig {{.Kubeconfig}}",
		"kubernetes cluster.local in-addr.arpa ip6.arpa {", "kubernetes cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig {{.Kubeconfig}}",
	).Replace(installed)
}

// TestStory is the whole user story against real processes: install on a
// kubeadm-shaped cluster, the sync and coredns-yurt (with the Corefile
// install wrote) running, every node answered, every kind of change seen by
// dig within a second, the tunnel Service recreated, port 9100 added,
// status --verify-dns all OK, and revert back to the originals.
func TestStory(t *testing.T) {
	k := newKubeadmCluster(t)
	ctx := context.Background()
	nodes := k.Client.CoreV1().Nodes()
	for i := 1; i <= 3; i++ { // master-1 is the kubeadm cluster's
		k.CreateNode(t, harness.Node{Name: fmt.Sprintf("worker-%d", i), InternalIP: fmt.Sprintf("192.168.0.2%d", i), Edge: true})
		createYurthub(t, k.ControlPlane, fmt.Sprintf("worker-%d", i))
	}
	k.ApplyConfigMap(t, harness.ServerConfig(map[string]string{tunnelnodes.HTTPSProxyPortsKey: ""}))
	original := k.snapshot(t)

	stop := k.PlayRolloutControllers(tunnelnodes.Namespace)
	if out, err := k.run(t, "install"); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	stop()
	cm, err := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, "coredns-yurt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sync := harness.StartSync(t, k.Kubeconfig, "--leader-elect=false")
	local := localCorefile(t, cm.Data["Corefile"])
	if !strings.Contains(local, "yurthosts {") || strings.Contains(local, "forward") || strings.Contains(local, "cache 30") {
		t.Fatalf("unexpected installed Corefile:\n%s", local)
	}
	dns := harness.StartCoreDNS(t, k.Kubeconfig, local)

	expectAnswer(t, storyBudget, dns.DNSAddr, "master-1", "A", "192.168.0.10")
	for i := 1; i <= 3; i++ {
		expectAnswer(t, storyBudget, dns.DNSAddr, fmt.Sprintf("worker-%d", i), "A", "10.96.0.9")
	}

	k.CreateNode(t, harness.Node{Name: "worker-4", InternalIP: "192.168.0.24", Edge: true})
	expectAnswer(t, storyBudget, dns.DNSAddr, "worker-4", "A", "10.96.0.9")

	if err := nodes.Delete(ctx, "worker-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, storyBudget, dns.DNSAddr, "worker-3", "A", "NXDOMAIN")

	updateNode(t, k.ControlPlane, "worker-2", func(n *corev1.Node) { n.Labels[tunnelnodes.EdgeNodeLabel] = "false" }, false)
	expectAnswer(t, storyBudget, dns.DNSAddr, "worker-2", "A", "192.168.0.22")

	updateNode(t, k.ControlPlane, "master-1", func(n *corev1.Node) {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.11"}}
	}, true)
	expectAnswer(t, storyBudget, dns.DNSAddr, "master-1", "A", "192.168.0.11")

	k.DeleteService(t, tunnelnodes.Namespace, tunnelnodes.ServiceName)
	k.CreateService(t, harness.TunnelService("10.96.0.99"))
	expectAnswer(t, storyBudget, dns.DNSAddr, "worker-1", "A", "10.96.0.99")
	expectAnswer(t, storyBudget, dns.DNSAddr, "worker-4", "A", "10.96.0.99")

	k.ApplyConfigMap(t, harness.ServerConfig(map[string]string{tunnelnodes.HTTPSProxyPortsKey: "9100"}))
	harness.Eventually(t, time.Second, func() error {
		svc, err := k.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range svc.Spec.Ports {
			if p.Name == "dnat-9100" && p.Port == 9100 && p.TargetPort.IntValue() == 10263 {
				return nil
			}
		}
		return fmt.Errorf("no dnat-9100 port: %v", svc.Spec.Ports)
	})

	out, err := k.run(t, "status", "--verify-dns", dns.DNSAddr)
	if err != nil || strings.Count(out, " OK") != 4 || !allApplied(out) {
		t.Errorf("status --verify-dns: %v\n%s", err, out)
	}

	sync.Stop() // the sync Deployment goes with revert; so does the local one
	stop = k.PlayRolloutControllers(tunnelnodes.Namespace)
	out, err = k.run(t, "revert")
	stop()
	if err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	if changed := diffSnapshots(original, k.snapshot(t)); len(changed) > 0 {
		t.Errorf("after revert, changed from the originals: %v", changed)
	}
}
