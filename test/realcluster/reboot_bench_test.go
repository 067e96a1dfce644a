package realcluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkEdgeReboot: worker-1 cut off from the cloud for 5 minutes and
// rebooted at the start of the cut, in the layout users run today (install
// without --node-local-dns: pods ask kube-dns, a coredns-yurt DaemonSet
// within the node pool) and with NodeLocal DNS, one after the other on one
// cluster. From a pod on worker-1, every probeEvery, one try with a 1 s
// timeout: the node names and the ClusterIP Services that existed before
// the cut. It reports the queries that failed while cut off, and after the
// link came back when yurthub proxied again, when the node-local cache's
// token was a real one, and when a Node created during the cut answered.
// Stock: what yurthub's cache says kube-dns's endpoints are after the
// reboot (the stale EndpointSlice of OpenYurt #2809).
func BenchmarkEdgeReboot(b *testing.B) {
	const cutFor = 5 * time.Minute
	results := map[string]any{"cut_seconds": cutFor.Seconds()}
	for _, layout := range []struct {
		name string
		args []string
	}{{"stock", nil}, {"node-local", []string{"--node-local-dns"}}} {
		client := "reboot-" + layout.name
		if out, err := runSync(b, append([]string{"install", "--skip", "control-plane"}, layout.args...)...); err != nil {
			b.Fatalf("install %v: %v\n%s", layout.args, err, out)
		}
		// Made after install: it resolves where the layout says.
		startPausePod(b, client, "worker-1")
		want := rebootNames(b)
		resolver := ""
		if layout.name == "node-local" {
			resolver = nodelocal.Address.String()
		}
		var stale func()
		if layout.name == "stock" {
			stale = func() {
				results["stock_yurthub_kube_dns_endpoints"], results["stock_coredns_worker_1_ip"] = staleKubeDNSEndpoints(b)
			}
		}
		fig := rebootWhileCutOff(b, client, resolver, want, cutFor, 1, layout.name == "node-local", stale)
		r := map[string]any{
			"pod_back_s": fig.PodBack.Seconds(), "dns_answering_s": fig.CacheAnswers.Seconds(),
			"queries": fig.Probed, "failed": fig.Failed,
			"yurthub_healthy_s": fig.Healthy.Seconds(), "real_token_seen": fig.TokenSeen, "real_token_s": fig.RealToken.Seconds(), "change_answered_s": fig.Answered.Seconds(),
		}
		results[layout.name] = r
		b.Logf("%s: %d of %d queries failed while cut off; link back: yurthub %s, token %s, change answered %s",
			layout.name, fig.Failed, fig.Probed, fig.Healthy.Round(100*time.Millisecond), fig.token(), fig.Answered.Round(100*time.Millisecond))
		b.ReportMetric(float64(fig.Failed), layout.name+"-failed")
		b.ReportMetric(float64(fig.Probed), layout.name+"-queries")
		b.ReportMetric(fig.Answered.Seconds(), layout.name+"-change-answered-s")
		grace := int64(0)
		cs.CoreV1().Pods("kube-system").Delete(context.Background(), client, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		waitPodGone(b, client)
		if out, err := runSync(b, "revert"); err != nil {
			b.Fatalf("revert: %v\n%s", err, out)
		}
	}
	harness.RecordResults(b, "edge-reboot", results)
}

// staleKubeDNSEndpoints reads kube-dns's EndpointSlice from yurthub's disk
// cache on worker-1 (what it serves coredns-yurt, and kube-proxy where
// kube-proxy goes through yurthub, while cut off), and worker-1's coredns
// pod's address now.
func staleKubeDNSEndpoints(b testing.TB) (cached []string, now string) {
	files, _ := filepath.Glob(filepath.Join(kc.Node("worker-1").StateDir("etc/kubernetes"), "cache", "*", "endpointslices.*", "kube-system", "kube-dns-*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var slice struct {
			Endpoints []struct {
				Addresses []string
				NodeName  string
			}
		}
		if json.Unmarshal(data, &slice) == nil {
			for _, e := range slice.Endpoints {
				cached = append(cached, strings.Join(e.Addresses, ",")+" ("+e.NodeName+", "+filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(f))))+")")
			}
		}
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=kube-dns", FieldSelector: "spec.nodeName=worker-1"})
	if err == nil {
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				now, _ = kc.Node("worker-1").PodIP(context.Background(), "kube-system", p.Name)
			}
		}
	}
	b.Logf("stock: yurthub's cached kube-dns EndpointSlice on worker-1: %v; worker-1's CoreDNS pod now at %s", cached, now)
	return cached, now
}
