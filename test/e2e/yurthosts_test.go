// Package e2e runs the real binaries against the real control plane and
// checks them the way an operator would: with dig.
package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// seedCorefile is the Corefile OpenYurt documents for CoreDNS, with the
// hosts /etc/edge/tunnel-nodes block replaced by yurthosts, loopback ports,
// and the harness kubeconfig for the two API-backed plugins.
const seedCorefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    errors
    log . {
        class denial success
    }
    health {{.HealthAddr}} {
        lameduck 1s
    }
    ready {{.ReadyAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    prometheus {{.MetricsAddr}}
    forward . /etc/resolv.conf {
        max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
`

// onlyYurthosts answers from yurthosts alone (no cache, no fallthrough), so
// each dig sees the plugin's current records.
const onlyYurthosts = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    health {{.HealthAddr}}
    prometheus {{.MetricsAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
    }
}
`

func recordsConfigMap(lines ...string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ConfigMapName},
		Data:       map[string]string{tunnelnodes.ConfigMapKey: strings.Join(lines, "\n")},
	}
}

// answerBudget is how long an answer may take to follow the API here.
const answerBudget = 2 * time.Second

// TestDropInCorefile runs the Corefile OpenYurt users have, with yurthosts in
// place of the hosts block, and checks node names and that everything else
// still goes to the kubernetes plugin.
func TestDropInCorefile(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	svc := cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.ApplyConfigMap(t, recordsConfigMap("10.96.0.9\tworker-1", "10.96.0.9\tworker-2", "192.168.0.10\tmaster-1"))
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, seedCorefile)

	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "A", "10.96.0.9")
	expectAnswer(t, answerBudget, dns.DNSAddr, "WORKER-2.", "A", "10.96.0.9")
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "A", "192.168.0.10")
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "AAAA", "NODATA")
	r := harness.Dig(t, dns.DNSAddr, "master-1", "A")
	if !r.HasFlag("aa") || r.Answers[0].TTL != 5 {
		t.Errorf("want an authoritative answer with TTL 5: %s", r.Raw)
	}
	// Cloud-node IP in reverse from yurthosts; the tunnel ClusterIP in
	// reverse from the next plugin (kubernetes names the Service).
	expectAnswer(t, answerBudget, dns.DNSAddr, "10.0.168.192.in-addr.arpa.", "PTR", "master-1.")
	expectAnswer(t, answerBudget, dns.DNSAddr, "9.0.96.10.in-addr.arpa.", "PTR", svc.Name+"."+svc.Namespace+".svc.cluster.local.")
	// Cluster names fall through to kubernetes.
	k, err := cp.Client.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, answerBudget, dns.DNSAddr, "kubernetes.default.svc.cluster.local", "A", k.Spec.ClusterIP)

	if got := harness.Metric(t, dns.MetricsURL, `coredns_yurthosts_entries{configmap="kube-system/yurt-tunnel-nodes"}`); got != 3 {
		t.Errorf("coredns_yurthosts_entries = %v, want 3", got)
	}
	if got := harness.Metric(t, dns.MetricsURL, `coredns_yurthosts_last_sync_timestamp_seconds{configmap="kube-system/yurt-tunnel-nodes"}`); time.Since(time.Unix(int64(got), 0)) > time.Minute {
		t.Errorf("last sync timestamp %v is not recent", got)
	}
}

// TestAnswersFollowTheAPI walks every change an operator can make to the
// ConfigMap and the Service and checks dig sees each one promptly.
func TestAnswersFollowTheAPI(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	// Neither object exists yet: a missing object counts as synced.
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, onlyYurthosts)
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "A", "NXDOMAIN")

	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.ApplyConfigMap(t, recordsConfigMap("10.96.0.9\tnode-1", "10.96.0.9\tedge-node-1", "192.168.0.10\tmaster-1"))
	expectAnswer(t, answerBudget, dns.DNSAddr, "node-1", "A", "10.96.0.9")
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-node-1", "A", "10.96.0.9")

	// Deleting node-1 leaves edge-node-1 (upstream matched by suffix).
	cp.ApplyConfigMap(t, recordsConfigMap("10.96.0.9\tedge-node-1", "192.168.0.10\tmaster-1"))
	expectAnswer(t, answerBudget, dns.DNSAddr, "node-1", "A", "NXDOMAIN")
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-node-1", "A", "10.96.0.9")

	// Malformed lines are skipped and counted; the rest is served.
	before := harness.Metric(t, dns.MetricsURL, `coredns_yurthosts_parse_errors_total{configmap="kube-system/yurt-tunnel-nodes"}`)
	cp.ApplyConfigMap(t, annotated(recordsConfigMap("10.96.0.9\tedge-node-1", "not-an-ip\tbroken", "192.168.0.10\tmaster-1 bad/name", "192.168.0.11\tmaster-2"), "10.96.0.9"))
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-2", "A", "192.168.0.11")
	if got := harness.Metric(t, dns.MetricsURL, `coredns_yurthosts_parse_errors_total{configmap="kube-system/yurt-tunnel-nodes"}`); got-before != 2 {
		t.Errorf("parse errors grew by %v, want 2", got-before)
	}
	if !strings.Contains(dns.Output(), "skipped 2 malformed") {
		t.Errorf("no log line for the skipped lines:\n%s", dns.Output())
	}

	// The Service is recreated with a new ClusterIP: edge names (annotated
	// above as rendered for 10.96.0.9) follow at once, before anybody
	// rewrites the ConfigMap.
	cp.DeleteService(t, tunnelnodes.Namespace, tunnelnodes.ServiceName)
	cp.CreateService(t, harness.TunnelService("10.96.0.77"))
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-node-1", "A", "10.96.0.77")
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "A", "192.168.0.10")

	// The Service disappears (as yurthub hides it on edge nodes): served as written.
	cp.DeleteService(t, tunnelnodes.Namespace, tunnelnodes.ServiceName)
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-node-1", "A", "10.96.0.9")

	// The records go away with the ConfigMap.
	if err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Delete(ctx, tunnelnodes.ConfigMapName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-node-1", "A", "NXDOMAIN")
}

// TestDualStackTunnel: with a dual-stack tunnel Service, AAAA for edge
// names answers its IPv6 ClusterIP.
func TestDualStackTunnel(t *testing.T) {
	cp := harness.Start(t, harness.Options{DualStack: true})
	cp.CreateService(t, harness.TunnelService("10.96.0.9", "fd00:10:96::9"))
	cp.ApplyConfigMap(t, recordsConfigMap("10.96.0.9\tworker-1", "192.168.0.10\tmaster-1"))
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, onlyYurthosts)
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "A", "10.96.0.9")
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "AAAA", "fd00:10:96::9")
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "AAAA", "NODATA")
}

// TestServesThroughAPIOutage: once synced, losing the apiserver changes nothing.
func TestServesThroughAPIOutage(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.ApplyConfigMap(t, recordsConfigMap("10.96.0.9\tworker-1", "192.168.0.10\tmaster-1"))
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, onlyYurthosts)
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-1", "A", "10.96.0.9")

	cp.KillAPIServer(t)
	deadline := time.Now().Add(3 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		r := harness.Dig(t, dns.DNSAddr, "worker-1", "A")
		if err := matchAnswer(r, "A", []string{"10.96.0.9"}); err != nil {
			t.Fatalf("query %d during the outage: %v", n, err)
		}
	}
	resp, err := http.Get(dns.ReadyURL)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/ready during the outage: %v %v", resp, err)
	}
}

// TestCoreDNSYurtBinary: the version names both releases, and the plugin
// list is the stock one plus yurthosts.
func TestCoreDNSYurtBinary(t *testing.T) {
	t.Parallel()
	bin := harness.Binary(t, "coredns-yurt")
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "CoreDNS-1.15.0+yurthosts-") {
		t.Errorf("-version: %v %q", err, out)
	}
	out, err = exec.Command(bin, "-plugins").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	plugins := strings.Fields(string(out))
	for _, p := range []string{"yurthosts", "hosts", "kubernetes", "forward", "cache", "reload", "loadbalance", "loop", "ready", "health", "prometheus", "errors", "log", "whoami"} {
		if !slices.Contains(plugins, p) {
			t.Errorf("-plugins lacks %s", p)
		}
	}
}
