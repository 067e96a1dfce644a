package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ravenCorefile is raven-proxy-dns's Corefile as install --profile raven
// writes it (yurthosts in place of its hosts block), with loopback ports and
// the test's kubeconfig; the kubernetes plugin last, so that an address it
// does not know is NXDOMAIN.
const ravenCorefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    health {{.HealthAddr}}
    prometheus {{.MetricsAddr}}
    yurthosts {
        configmap kube-system/edge-tunnel-nodes
        service kube-system/x-raven-proxy-internal-svc
        kubeconfig {{.Kubeconfig}}
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}}
    }
}
`

// digEventually waits up to 2 s until server answers name qtype with
// exactly want (the answers' data, sorted), or with the status want[0].
func digEventually(t *testing.T, server, name, qtype string, want ...string) {
	t.Helper()
	harness.Eventually(t, 2*time.Second, func() error {
		r, err := harness.DigErr(server, name, qtype)
		if err != nil {
			return err
		}
		if got := r.Data(qtype); r.Status != "NOERROR" && !(len(want) == 1 && want[0] == r.Status) || r.Status == "NOERROR" && !slices.Equal(got, want) {
			return fmt.Errorf("%s %s: %s %v, want %v", name, qtype, r.Status, got, want)
		}
		return nil
	})
}

// TestRavenYurthosts: coredns-yurt with raven-proxy-dns's Corefile, every
// name (cloud ones too) at the proxy ClusterIP. Records written by
// yurt-manager (no annotations) answer as written and the proxy IP is never
// answered in reverse by yurthosts (the kubernetes plugin names the
// Service); once the sync has written them, a recreated proxy Service is
// followed by the remap alone, with the sync stopped.
func TestRavenYurthosts(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	ns := tunnelnodes.Namespace
	cp.ApplyConfigMap(t, harness.RavenConfig("true"))
	cp.CreateService(t, harness.RavenProxyService("10.96.100.7"))
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "192.168.0.10"})
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.1.21", Edge: true})
	upstream := "10.96.100.7\tmaster-1\n10.96.100.7\tworker-1" // yurt-manager's bytes, no annotations
	cp.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tunnelnodes.RavenConfigMapName},
		Data: map[string]string{tunnelnodes.ConfigMapKey: upstream}})
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, ravenCorefile)
	proxyName := tunnelnodes.RavenServiceName + "." + ns + ".svc.cluster.local."
	for _, name := range []string{"master-1", "worker-1"} {
		digEventually(t, dns.DNSAddr, name, "A", "10.96.100.7")
	}
	digEventually(t, dns.DNSAddr, "7.100.96.10.in-addr.arpa.", "PTR", proxyName)

	sync := harness.StartSync(t, cp.Kubeconfig, "--profile", "raven", "--leader-elect=false")
	ravenRecords(t, cp, upstream, "10.96.100.7") // same bytes, now annotated
	sync.Stop()

	cp.DeleteService(t, ns, tunnelnodes.RavenServiceName)
	cp.CreateService(t, harness.RavenProxyService("10.96.100.8"))
	for _, name := range []string{"master-1", "worker-1"} {
		digEventually(t, dns.DNSAddr, name, "A", "10.96.100.8")
	}
	digEventually(t, dns.DNSAddr, "8.100.96.10.in-addr.arpa.", "PTR", proxyName)
	digEventually(t, dns.DNSAddr, "7.100.96.10.in-addr.arpa.", "PTR", "NXDOMAIN")
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), tunnelnodes.RavenConfigMapName, metav1.GetOptions{})
	if err != nil || cm.Data[tunnelnodes.ConfigMapKey] != upstream {
		t.Errorf("the records changed with the sync stopped (%v): the answers must come from the remap", err)
	}

	// status --verify-dns checks Raven's rules: every node, cloud ones
	// too, at the proxy ClusterIP.
	out, err := runSync(t, cp, "status", "--profile", "raven", "--verify-dns", dns.DNSAddr)
	for _, name := range []string{"master-1", "worker-1"} {
		if !strings.Contains(out, fmt.Sprintf("%-30s %-5s %-18s expected %-18s OK", name, "proxy", "10.96.100.8", "10.96.100.8")) {
			t.Errorf("status --verify-dns (%v): %s not checked against the proxy ClusterIP:\n%s", err, name, out)
		}
	}
}
