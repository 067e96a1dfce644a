package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// fleetCorefile serves the records as install's Corefile does; {{.Extra}}
// is empty (the single ConfigMap) or the shards option.
const fleetCorefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
        EXTRA
    }
}
`

func fleetCorefileWith(extra string) string { return strings.Replace(fleetCorefile, "EXTRA", extra, 1) }

// countingBody counts the bytes read from a response body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// countingTransport counts the response bytes of every request.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = countingBody{resp.Body, t.n}
	}
	return resp, err
}

// watchers are w real client-go watches, each with its own client, in
// protobuf as yurthosts asks: the bytes the apiserver sends them, and the
// events they got.
type watchers struct {
	bytes, events atomic.Int64
	stops         []func()
}

func startWatchers(b *testing.B, cfg *rest.Config, w int, namespace string, opts metav1.ListOptions) *watchers {
	b.Helper()
	ws := &watchers{}
	ctx := context.Background()
	for range w {
		c := rest.CopyConfig(cfg)
		c.ContentType = "application/vnd.kubernetes.protobuf"
		c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		c.QPS, c.Burst = -1, 0
		c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &ws.bytes} }
		client := kubernetes.NewForConfigOrDie(c)
		list, err := client.CoreV1().ConfigMaps(namespace).List(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		watchOpts := opts
		watchOpts.ResourceVersion = list.ResourceVersion
		watch, err := client.CoreV1().ConfigMaps(namespace).Watch(ctx, watchOpts)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for range watch.ResultChan() {
				ws.events.Add(1)
			}
		}()
		ws.stops = append(ws.stops, watch.Stop)
	}
	return ws
}

func (ws *watchers) stop() {
	for _, s := range ws.stops {
		s()
	}
}

// flipEdge turns node name into a cloud node at its InternalIP, or back.
func flipEdge(b testing.TB, c kubernetes.Interface, name string) {
	b.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels[tunnelnodes.EdgeNodeLabel] == "true" {
			n.Labels[tunnelnodes.EdgeNodeLabel] = "false"
		} else {
			n.Labels[tunnelnodes.EdgeNodeLabel] = "true"
		}
		_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// createFleet creates nodes 0..n-1 of nodeOf, with their status (as a
// kubelet registers its Node), 32 writers in parallel, in protobuf.
func createFleet(b *testing.B, cp *harness.ControlPlane, n int, nodeOf func(i int) *corev1.Node) {
	b.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = runtime.ContentTypeProtobuf
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	var wg gosync.WaitGroup
	var failed atomic.Value
	const writers = 32
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n && failed.Load() == nil; i += writers {
				if _, err := c.CoreV1().Nodes().Create(ctx, nodeOf(i), metav1.CreateOptions{}); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
}

// edgeNode is fleet node i as a small Node: an edge node with an InternalIP
// (a flipped one answers that address).
func edgeNode(i int) *corev1.Node {
	return harness.Node{Name: fleetNode(i), InternalIP: fleetIP(i), Edge: true}.Object()
}

func fleetNode(i int) string { return fmt.Sprintf("edge-node-%06d", i) }
func fleetIP(i int) string   { return fmt.Sprintf("10.%d.%d.%d", 100+i>>16, i>>8&255, i&255) }

// shardSetComplete reports whether the shards of the records hold n names
// in one complete set, and its count.
func shardSetComplete(b testing.TB, c kubernetes.Interface, n int) (int, bool) {
	b.Helper()
	list, err := c.CoreV1().ConfigMaps(tunnelnodes.ShardsNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: tunnelnodes.RecordsOfLabel + "=" + tunnelnodes.ConfigMapName})
	if err != nil {
		b.Fatal(err)
	}
	cms := make([]*corev1.ConfigMap, len(list.Items))
	for i := range list.Items {
		cms[i] = &list.Items[i]
	}
	sets, _ := tunnelnodes.ShardSets(tunnelnodes.ConfigMapName, cms)
	set, ok := tunnelnodes.ServedShardSet(sets)
	if !ok || len(sets) != 1 {
		return 0, false
	}
	names := 0
	for _, cm := range set.Shards {
		if text := cm.Data[tunnelnodes.ConfigMapKey]; text != "" {
			names += strings.Count(text, "\n") + 1
		}
	}
	return set.Count, names == n
}

// fleet is a control plane with the shards' namespace, the tunnel Service
// and n edge nodes, and the sync having written all their records.
func fleet(b *testing.B, n int, syncArgs ...string) (*harness.ControlPlane, kubernetes.Interface, *harness.Sync, time.Duration) {
	b.Helper()
	cp := harness.Start(b, harness.Options{})
	c := cp.UnthrottledClient()
	if _, err := c.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.ShardsNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	cp.CreateService(b, harness.TunnelService(tunnelIP))
	created := time.Now()
	createFleet(b, cp, n, edgeNode)
	b.Logf("%d nodes created in %s", n, time.Since(created).Round(time.Second))
	harness.Binary(b, "tunnel-nodes-sync")
	harness.Binary(b, "coredns-yurt")
	start := time.Now()
	s := harness.StartSync(b, cp.Kubeconfig, append([]string{"--leader-elect=false"}, syncArgs...)...)
	for {
		if _, ok := shardSetComplete(b, c, n); ok {
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("the shards of %d nodes not written after 5 minutes", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cp, c, s, time.Since(start)
}

// BenchmarkFleetChange: at 5,000 nodes, what one node change costs the
// watchers of each layout, side by side in one run: W real watches of the
// single records ConfigMap (what every coredns-yurt pod, and the kubelet of
// every pod mounting it, watched) and W real watches of the shards (what
// coredns-yurt watches now), the bytes the apiserver sends them per change,
// extrapolated linearly to 5,000 watchers (one per node), and the sync's
// writes; then node change → answer at a coredns-yurt of each layout, one
// after the other.
func BenchmarkFleetChange(b *testing.B) {
	const nodes, w = 5000, 50
	changes := 100
	if testing.Short() {
		changes = 10
	}
	cp, c, sync, _ := fleet(b, nodes)
	count, _ := shardSetComplete(b, c, nodes)
	single := startWatchers(b, cp.Config, w, tunnelnodes.Namespace,
		metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", tunnelnodes.ConfigMapName).String()})
	sharded := startWatchers(b, cp.Config, w, tunnelnodes.ShardsNamespace,
		metav1.ListOptions{LabelSelector: tunnelnodes.RecordsOfLabel + "=" + tunnelnodes.ConfigMapName})
	writesBefore := harness.Metric(b, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="shard"}`)
	singleWritesBefore := harness.Metric(b, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="configmap"}`)
	rng := rand.New(rand.NewPCG(7, 8))
	// change flips a random node and returns it, with the address it must
	// answer now.
	change := func() (name, want string, changed time.Time) {
		i := rng.IntN(nodes)
		name, want = fleetNode(i), fleetIP(i)
		n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if n.Labels[tunnelnodes.EdgeNodeLabel] != "true" {
			want = tunnelIP
		}
		time.Sleep(time.Duration(rng.Int64N(int64(100 * time.Millisecond))))
		changed = time.Now()
		flipEdge(b, c, name)
		return name, want, changed
	}

	// Bytes: both layouts' watchers see every change.
	var singleBytes, shardBytes int64
	for range changes {
		sb, se, hb, he := single.bytes.Load(), single.events.Load(), sharded.bytes.Load(), sharded.events.Load()
		change()
		deadline := time.Now().Add(10 * time.Second)
		for single.events.Load()-se < w || sharded.events.Load()-he < w {
			if time.Now().After(deadline) {
				b.Fatalf("watchers got %d and %d events of %d", single.events.Load()-se, sharded.events.Load()-he, w)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // the rest of a frame in flight
		singleBytes += single.bytes.Load() - sb
		shardBytes += sharded.bytes.Load() - hb
	}
	single.stop()
	sharded.stop()
	shardWrites := harness.Metric(b, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="shard"}`) - writesBefore
	singleWrites := harness.Metric(b, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="configmap"}`) - singleWritesBefore

	// Change → answer: one coredns-yurt per layout, each alone on its CPU
	// while measured.
	answerLatency := func(extra string) []time.Duration {
		srv := harness.StartCoreDNS(b, cp.Kubeconfig, fleetCorefileWith(extra), harness.CoreDNSOptions{CPUs: serverCPU})
		defer srv.Stop()
		var lat []time.Duration
		for range changes {
			name, want, changed := change()
			lat = append(lat, waitForAnswer(b, srv.DNSAddr, name, want, changed))
		}
		slices.Sort(lat)
		return lat
	}
	latShards := answerLatency("shards " + tunnelnodes.ShardsNamespace)
	latSingle := answerLatency("")
	syncMean := harness.Metric(b, sync.MetricsURL, "tunnel_nodes_sync_sync_duration_seconds_sum") /
		harness.Metric(b, sync.MetricsURL, "tunnel_nodes_sync_sync_duration_seconds_count")

	perWatcherSingle := float64(singleBytes) / float64(changes*w)
	perWatcherShards := float64(shardBytes) / float64(changes*w)
	ratio := perWatcherShards / perWatcherSingle
	p99Single, p99Shards := percentile(latSingle, 0.99), percentile(latShards, 0.99)
	b.ReportMetric(perWatcherSingle, "B/watcher/change-single")
	b.ReportMetric(perWatcherShards, "B/watcher/change-shards")
	b.ReportMetric(100*ratio, "%-bytes-shards/single")
	b.ReportMetric(float64(p99Single.Microseconds())/1000, "p99-ms-change-to-answer-single")
	b.ReportMetric(float64(p99Shards.Microseconds())/1000, "p99-ms-change-to-answer-shards")
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	harness.RecordResults(b, "fleet-change", map[string]any{
		"nodes": nodes, "shards": count, "watchers": w, "changes": changes,
		"bytes_per_watcher_single": perWatcherSingle, "bytes_per_watcher_shards": perWatcherShards,
		"mb_per_change_5000_single": perWatcherSingle * nodes / 1e6, "mb_per_change_5000_shards": perWatcherShards * nodes / 1e6,
		"percent":       100 * ratio,
		"p50_ms_single": ms(percentile(latSingle, 0.5)), "p99_ms_single": ms(p99Single),
		"p50_ms_shards": ms(percentile(latShards, 0.5)), "p99_ms_shards": ms(p99Shards),
		"shard_writes_per_change": shardWrites / float64(changes), "single_writes_per_change": singleWrites / float64(changes),
		"sync_mean_ms": syncMean * 1000,
	})
	b.Logf("%d nodes, %d shards, %d changes: %.0f B per watcher per change on the single ConfigMap, %.0f B on the shards (%.2f%%); "+
		"at 5,000 watchers %.1f MB vs %.2f MB per change. Change → answer p50/p99: single %s/%s, shards %s/%s. Sync writes per change: %.2f shards, %.2f single; a sync takes %.1f ms on average",
		nodes, count, changes, perWatcherSingle, perWatcherShards, 100*ratio, perWatcherSingle*nodes/1e6, perWatcherShards*nodes/1e6,
		percentile(latSingle, 0.5), p99Single, percentile(latShards, 0.5), p99Shards, shardWrites/float64(changes), singleWrites/float64(changes), syncMean*1000)
	if p99Shards > 100*time.Millisecond {
		b.Errorf("node change → answer p99 %s on the shards, over 100 ms", p99Shards)
	}
	if ratio > 0.01 {
		b.Errorf("one change sends the shard watchers %.2f%% of the single ConfigMap's bytes, over 1%%", 100*ratio)
	}
}

// waitForAnswer asks server every millisecond until name answers want (A),
// and returns the time since changed.
func waitForAnswer(b testing.TB, server, name, want string, changed time.Time) time.Duration {
	return waitForAnswerWithin(b, server, name, want, changed, 10*time.Second, time.Millisecond)
}

// waitForAnswerWithin is waitForAnswer giving up limit after changed, and
// asking again every interval.
func waitForAnswerWithin(b testing.TB, server, name, want string, changed time.Time, limit, every time.Duration) time.Duration {
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	m := new(dns.Msg).SetQuestion(name+".", dns.TypeA)
	for time.Since(changed) < limit {
		r, _, err := c.Exchange(m, server)
		if err == nil && len(r.Answer) == 1 {
			if a, ok := r.Answer[0].(*dns.A); ok && a.A.String() == want {
				return time.Since(changed)
			}
		}
		time.Sleep(every)
	}
	b.Errorf("%s did not answer %s → %s within %s", server, name, want, limit)
	return limit
}

// BenchmarkFleet100k: 100,000 kubelet-sized Nodes (kubeletNode: worker-1's
// Node from the real cluster, 50 images, about 15 KB of JSON each). The sync
// of baselineCommit and today's, one after the other against the same
// apiserver and fleet, each with the GOMEMLIMIT its deployment gave it and
// from a start with no shards: start → every record written, RSS (and its
// peak) and Go heap after start and after 200 changes at 20/s, change →
// answer at a coredns-yurt serving the shards. Then today's sync under the
// kubelets' status churn beside a bare informer (measureFleetChurn). Then
// coredns-yurt from start to ready and its resident memory over the same
// server with no records, and a spot-check of names.
func BenchmarkFleet100k(b *testing.B) {
	nodes := 100000
	if testing.Short() {
		nodes = 20000
	}
	cp := harness.Start(b, harness.Options{EtcdQuotaBytes: 8 << 30})
	c := cp.UnthrottledClient()
	if _, err := c.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.ShardsNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	cp.CreateService(b, harness.TunnelService(tunnelIP))
	template := kubeletNodeTemplate(b)
	size, err := json.Marshal(kubeletNode(template, 0))
	if err != nil {
		b.Fatal(err)
	}
	created := time.Now()
	createFleet(b, cp, nodes, func(i int) *corev1.Node { return kubeletNode(template, i) })
	b.Logf("%d nodes of %d bytes of JSON each created in %s", nodes, len(size), time.Since(created).Round(time.Second))

	srv := harness.StartCoreDNS(b, cp.Kubeconfig, fleetCorefileWith("shards "+tunnelnodes.ShardsNamespace), harness.CoreDNSOptions{CPUs: serverCPU})
	rng := rand.New(rand.NewPCG(3, 4))
	baseline := measureFleetSync(b, cp, c, srv, nodes, harness.BinaryAt(b, baselineCommit, "tunnel-nodes-sync"), "1GiB", rng)
	today := measureFleetSync(b, cp, c, srv, nodes, harness.Binary(b, "tunnel-nodes-sync"), deployedGOMEMLIMIT(b), rng)
	// The client QPS default: today's sync at the old --kube-api-qps 100.
	oldQPS := measureFleetSync(b, cp, c, srv, nodes, harness.Binary(b, "tunnel-nodes-sync"), deployedGOMEMLIMIT(b), rng,
		"--kube-api-qps=100", "--kube-api-burst=200")
	churn := measureFleetChurn(b, cp, c, srv, nodes, rng)
	srv.Stop()

	measure := func(records string) (time.Duration, int, *harness.CoreDNS) {
		corefile := strings.Replace(fleetCorefileWith("shards "+tunnelnodes.ShardsNamespace), "kubeconfig", "configmap kube-system/"+records+"\n        kubeconfig", 1)
		start := time.Now()
		srv := harness.StartCoreDNS(b, cp.Kubeconfig, corefile, harness.CoreDNSOptions{CPUs: serverCPU})
		ready := time.Since(start)
		time.Sleep(2 * time.Second) // let the first GC cycles run
		return ready, vmRSS(b, srv.Pid()), srv
	}
	emptyReady, emptyRSS, empty := measure("no-such-records")
	empty.Stop()
	ready, rss, srv := measure(tunnelnodes.ConfigMapName)
	// Spot-check: 200 names at random answer as the nodes say.
	for range 200 {
		i := rng.IntN(nodes)
		n, err := c.CoreV1().Nodes().Get(context.Background(), fleetNode(i), metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		want := tunnelIP
		if n.Labels[tunnelnodes.EdgeNodeLabel] != "true" {
			want = fleetIP(i)
		}
		waitForAnswer(b, srv.DNSAddr, fleetNode(i), want, time.Now())
	}
	r := harness.Dig(b, srv.DNSAddr, fleetNode(nodes-1), "A")
	b.Logf("dig %s: %s %v", fleetNode(nodes-1), r.Status, r.Answers)

	b.ReportMetric(float64(today.written.Milliseconds()), "ms-sync-start-to-written")
	b.ReportMetric(today.peakRSS, "MiB-sync-peak-rss")
	b.ReportMetric(baseline.peakRSS/today.peakRSS, "x-less-peak-rss-than-baseline")
	b.ReportMetric(float64(ready.Milliseconds()), "ms-coredns-start-to-ready")
	b.ReportMetric(float64(rss-emptyRSS)/1024, "MiB-coredns-rss-over-empty")
	harness.RecordResults(b, "fleet-100k", map[string]any{"nodes": nodes, "node_json_bytes": len(size),
		"baseline_commit": baselineCommit[:7], "churn_changes": fleetChurn, "baseline": baseline.fields(), "today": today.fields(),
		"today_qps_100_written_ms": oldQPS.written.Milliseconds(), "coredns_ready_ms": ready.Milliseconds(),
		"coredns_empty_ready_ms":     emptyReady.Milliseconds(),
		"coredns_rss_over_empty_mib": float64(rss-emptyRSS) / 1024, "churn": churn.fields()})
	for _, m := range []struct {
		name string
		fleetSyncRun
	}{{"baseline " + baselineCommit[:7], baseline}, {"today", today}, {"today at --kube-api-qps 100", oldQPS}} {
		b.Logf("%s (GOMEMLIMIT %s): %d nodes in %d shards written %s after start; RSS %.0f MiB (peak %.0f), heap in use %.0f MiB; "+
			"after %d changes at 20/s (%.0f shard writes) RSS %.0f MiB (peak %.0f), heap %.0f MiB; change → answer p50 %s p99 %s",
			m.name, m.gomemlimit, nodes, m.shards, m.written.Round(time.Millisecond), m.startRSS, m.startPeakRSS, m.startHeap,
			fleetChurn, m.churnWrites, m.rss, m.peakRSS, m.heap, percentile(m.answer, 0.5), percentile(m.answer, 0.99))
	}
	b.Logf("under %.0f status updates/s (of %d asked; %d dropped, %d failed) for %s: CPU per update sync %.0f µs, bare informer %.0f µs (%.2fx), %.0f shard writes; "+
		"%d changes one at a time: change → answer p50 %s p99 %s max %s, %.0f shard writes, %s in syncs per change (the start-up full sync: %s); %d changes at once (%d shards): written in %s, all answered in %s, %.0f shard writes; "+
		"sync (GOMEMLIMIT %s) RSS %.0f MiB (peak %.0f), heap %.0f MiB",
		churn.rate, churnStatusPerSecond, churn.droppedUpdates, churn.failedUpdates, churn.window.Round(time.Second),
		churn.perUpdate(churn.syncCPU), churn.perUpdate(churn.informerCPU), churn.cpuRatio(), churn.windowShardWrites,
		len(churn.answer), percentile(churn.answer, 0.5), percentile(churn.answer, 0.99), percentile(churn.answer, 1), churn.changeShardWrites, churn.changeSync.Round(time.Microsecond), churn.fullSync.Round(time.Millisecond),
		churn.burst, churn.burstShards, churn.burstWritten.Round(time.Millisecond), churn.burstAnswered.Round(time.Millisecond), churn.burstShardWrites,
		churn.gomemlimit, churn.rss, churn.peakRSS, churn.heap)
	b.Logf("coredns-yurt ready %s after start (empty: %s), RSS +%.1f MiB over empty; 200 names spot-checked",
		ready.Round(time.Millisecond), emptyReady.Round(time.Millisecond), float64(rss-emptyRSS)/1024)
	if p99 := percentile(churn.answer, 0.99); p99 > 100*time.Millisecond {
		b.Errorf("under status churn, node change → answer p99 %s, over 100 ms", p99)
	}
	if churn.cpuRatio() > 1.5 {
		b.Errorf("the sync's CPU per status update is %.2fx a bare informer's, over 1.5x", churn.cpuRatio())
	}
	if churn.windowShardWrites != 0 || churn.changeShardWrites != float64(len(churn.answer)) {
		b.Errorf("shard writes: %.0f for status updates alone, %.0f for %d changes; want none and one a change",
			churn.windowShardWrites, churn.changeShardWrites, len(churn.answer))
	}
	if churn.burstAnswered > 5*time.Second {
		b.Errorf("%d changes at once answered in %s, over 5 s", churn.burst, churn.burstAnswered)
	}
	if max(today.peakRSS, churn.peakRSS) > 128 {
		b.Errorf("the sync's peak RSS %.0f MiB is over 128 MiB", max(today.peakRSS, churn.peakRSS))
	}
	if today.written > 30*time.Second {
		b.Errorf("the sync wrote every record %s after start, over 30 s", today.written.Round(time.Millisecond))
	}
	if ready > 2*time.Second {
		b.Errorf("coredns-yurt ready %s after start, over 2 s", ready)
	}
	if over := float64(rss-emptyRSS) / 1024; over > 64 {
		b.Errorf("coredns-yurt RSS %.1f MiB over empty, over 64 MiB", over)
	}
}

// baselineCommit is the sync before it kept its own compact node store
// (controller-runtime's cache of stripped Nodes, deployed with 1Gi).
const baselineCommit = "a96623a404a7657638d1dbdf1b34d1d32f59251c"

// fleetChurn is how many node changes, at 20 a second, each sync is put through.
const fleetChurn = 200

// fleetSyncRun is what BenchmarkFleet100k measures of one sync binary.
type fleetSyncRun struct {
	gomemlimit                        string
	written                           time.Duration
	shards                            int
	startRSS, startPeakRSS, startHeap float64 // MiB
	rss, peakRSS, heap                float64 // MiB, after the churn
	churnWrites                       float64
	answer                            []time.Duration // change → answer, sorted
}

func (r fleetSyncRun) fields() map[string]any {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return map[string]any{"gomemlimit": r.gomemlimit, "written_ms": r.written.Milliseconds(), "shards": r.shards,
		"start_rss_mib": r.startRSS, "start_peak_rss_mib": r.startPeakRSS, "start_heap_mib": r.startHeap,
		"rss_mib": r.rss, "peak_rss_mib": r.peakRSS, "heap_mib": r.heap, "churn_shard_writes": r.churnWrites,
		"answer_p50_ms": ms(percentile(r.answer, 0.5)), "answer_p99_ms": ms(percentile(r.answer, 0.99))}
}

// measureFleetSync runs the sync binary with GOMEMLIMIT gomemlimit on a
// fleet of n nodes whose shards it first deletes, and measures it.
func measureFleetSync(b *testing.B, cp *harness.ControlPlane, c kubernetes.Interface, srv *harness.CoreDNS, n int, binary, gomemlimit string, rng *rand.Rand, args ...string) fleetSyncRun {
	b.Helper()
	ctx := context.Background()
	shards := metav1.ListOptions{LabelSelector: tunnelnodes.RecordsOfLabel + "=" + tunnelnodes.ConfigMapName}
	if err := c.CoreV1().ConfigMaps(tunnelnodes.ShardsNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, shards); err != nil {
		b.Fatal(err)
	}
	run := fleetSyncRun{gomemlimit: gomemlimit}
	b.Setenv("GOMEMLIMIT", gomemlimit)
	start := time.Now()
	sync := harness.StartSyncBinary(b, binary, 5*time.Minute, cp.Kubeconfig, append([]string{"--leader-elect=false"}, args...)...)
	b.Setenv("GOMEMLIMIT", "off") // not for coredns-yurt: it is measured as it comes
	defer sync.Stop()
	for {
		if count, ok := shardSetComplete(b, c, n); ok {
			run.written, run.shards = time.Since(start), count
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("the shards of %d nodes not written after 5 minutes", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	heap := func() float64 { return harness.Metric(b, sync.MetricsURL, "go_memstats_heap_inuse_bytes") / (1 << 20) }
	run.startRSS, run.startPeakRSS, run.startHeap = float64(vmRSS(b, sync.Pid()))/1024, float64(vmHWM(b, sync.Pid()))/1024, heap()

	writesBefore := harness.Metric(b, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="shard"}`)
	for range fleetChurn {
		flipEdge(b, c, fleetNode(rng.IntN(n)))
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	run.churnWrites = harness.Metric(b, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="shard"}`) - writesBefore
	run.rss, run.peakRSS, run.heap = float64(vmRSS(b, sync.Pid()))/1024, float64(vmHWM(b, sync.Pid()))/1024, heap()

	for range 50 {
		i := rng.IntN(n)
		name, want := fleetNode(i), fleetIP(i)
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if node.Labels[tunnelnodes.EdgeNodeLabel] != "true" {
			want = tunnelIP
		}
		time.Sleep(time.Duration(rng.Int64N(int64(100 * time.Millisecond))))
		changed := time.Now()
		flipEdge(b, c, name)
		run.answer = append(run.answer, waitForAnswer(b, srv.DNSAddr, name, want, changed))
	}
	slices.Sort(run.answer)
	return run
}

// deployedGOMEMLIMIT is the GOMEMLIMIT deploy/tunnel-nodes-sync gives the sync.
func deployedGOMEMLIMIT(b testing.TB) string {
	b.Helper()
	objs, err := deploy.Render(deploy.TunnelNodesSync)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
			b.Fatal(err)
		}
		for _, ctr := range d.Spec.Template.Spec.Containers {
			for _, env := range ctr.Env {
				if env.Name == "GOMEMLIMIT" {
					return env.Value
				}
			}
		}
	}
	b.Fatal("deploy/tunnel-nodes-sync sets no GOMEMLIMIT")
	return ""
}
