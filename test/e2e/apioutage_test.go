package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeLocalCorefile is deploy/node-local-dns's Corefile as a cloud node's
// cache runs it (no yurthub: straight to the apiserver), on loopback ports
// with the harness kubeconfig and nothing to forward to: yurthosts on the
// records' shards, the kubernetes plugin with kubeadm's options, the cache
// in front.
const nodeLocalCorefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    health {{.HealthAddr}}
    prometheus {{.MetricsAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
        shards yurtdns-records
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
        startup_timeout 30s
    }
    cache 30 {
        serve_stale 1h immediate
        disable denial
    }
}
`

const (
	// longOutage outlasts the growth of client-go's default reflector
	// backoff (0.8 s doubling to its 30 s cap, each delay up to twice that
	// with jitter: 50–101 s of delays before the cap), so the kubernetes
	// plugin retries at its slowest when the apiserver returns, as after
	// any long outage (a control-plane upgrade, a reboot).
	longOutage = 105 * time.Second
	// reconnectBound is the promise: a change made once the apiserver is
	// back is answered within it.
	reconnectBound = 5 * time.Second
	// kubernetesPluginBound is client-go's slowest retry (the 30 s cap with
	// its jitter of up to another 30 s) plus a list: how late the
	// kubernetes plugin may answer a Service created after an outage. Its
	// informers (plugin/kubernetes/object.NewIndexerInformer) run through
	// client-go's cache.New, whose Config has no backoff: each reflector
	// keeps the default (0.8 s doubling to 30 s, jitter 1.0, reset after 2
	// minutes without a retry), which no Corefile option reaches.
	kubernetesPluginBound = 65 * time.Second
)

// TestAnswersSoonAfterAPIOutage: the node-local cache's Corefile is synced,
// kube-apiserver is killed for longOutage and started again; right after,
// a node is added to the records and a Service is created. yurthosts
// answers the node within reconnectBound (its reflectors retry every
// 0.5–0.75 s, whatever the outage's length) and a second change at once
// (its watch is back, not just a list); the kubernetes plugin's figure for
// the Service is logged, and held to client-go's backoff cap.
func TestAnswersSoonAfterAPIOutage(t *testing.T) {
	// Beside the other tests: it mostly waits out the outage, and its
	// bounds (answerBudget, reconnectBound) are seconds over answers of tens
	// of milliseconds.
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	records, err := deploy.Render(deploy.Records)
	if err != nil {
		t.Fatal(err)
	}
	cp.Apply(t, records, false)
	cp.CreateService(t, harness.TunnelService(edgeTunnelV4))
	lines := []string{edgeTunnelV4 + "\tedge-1", "192.168.0.10\tmaster-1"}
	applyShards(t, cp, lines, edgeTunnelV4)
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, nodeLocalCorefile)
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-1", "A", edgeTunnelV4)
	expectAnswer(t, answerBudget, dns.DNSAddr, "kubernetes.default.svc.cluster.local", "A", "10.96.0.1")

	cp.KillAPIServer(t)
	t.Logf("kube-apiserver killed for %s", longOutage)
	time.Sleep(longOutage)
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-1", "A", edgeTunnelV4)
	cp.StartAPIServer(t)

	back := time.Now()
	lines = append(lines, edgeTunnelV4+"\tedge-after-outage")
	applyShards(t, cp, lines, edgeTunnelV4)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-outage"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.77", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := cp.Client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Service after-outage: %v", err)
	}
	written := time.Since(back)
	node := make(chan answered, 1)
	service := make(chan answered, 1)
	go func() {
		node <- firstAnswer(dns.DNSAddr, "edge-after-outage", "A", edgeTunnelV4, back, kubernetesPluginBound)
	}()
	go func() {
		service <- firstAnswer(dns.DNSAddr, "after-outage.default.svc.cluster.local", "A", "10.96.0.77", back, kubernetesPluginBound)
	}()
	yurthosts, kubernetes := <-node, <-service
	t.Logf("apiserver back (healthy; the node and the Service written %s later): yurthosts answered the node after %s, the kubernetes plugin the Service after %s",
		written.Round(time.Millisecond), yurthosts.after.Round(time.Millisecond), kubernetes.after.Round(time.Millisecond))
	if yurthosts.err != nil || yurthosts.after > reconnectBound {
		t.Errorf("yurthosts: the node added after the outage answered after %s, want within %s (%v)", yurthosts.after.Round(time.Millisecond), reconnectBound, yurthosts.err)
	}
	if kubernetes.err != nil {
		t.Errorf("kubernetes plugin: the Service created after the outage: %v", kubernetes.err)
	}

	lines = append(lines, edgeTunnelV4+"\tedge-watched")
	applyShards(t, cp, lines, edgeTunnelV4)
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-watched", "A", edgeTunnelV4)
}

// answered is how long after a moment a name first answered, or why it
// did not within the time given.
type answered struct {
	after time.Duration
	err   error
}

// firstAnswer polls server every 20 ms until name/qtype answers want,
// for at most within after since.
func firstAnswer(server, name, qtype, want string, since time.Time, within time.Duration) answered {
	for {
		r, err := harness.DigErr(server, name, qtype)
		if err == nil {
			err = matchAnswerData(r, qtype, []string{want})
		}
		after := time.Since(since)
		if err == nil {
			return answered{after: after}
		}
		if after > within {
			return answered{after: after, err: fmt.Errorf("%s %s not answered within %s: %v", name, qtype, within, err)}
		}
		time.Sleep(20 * time.Millisecond)
	}
}
