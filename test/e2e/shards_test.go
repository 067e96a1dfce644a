package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shardsCorefile serves the records from their shards, with metrics.
const shardsCorefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    prometheus {{.MetricsAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
        shards yurtdns-records
    }
}
`

// shards are the stored shards of the yurt-tunnel records, by name.
func shards(t harness.TB, cp *harness.ControlPlane) map[string]*corev1.ConfigMap {
	t.Helper()
	list, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.ShardsNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: tunnelnodes.RecordsOfLabel + "=" + tunnelnodes.ConfigMapName})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// expectShardSet waits for exactly one set, of count shards, holding
// exactly lines, each line in the shard of its name.
func expectShardSet(t harness.TB, within time.Duration, cp *harness.ControlPlane, count int, lines []string) {
	t.Helper()
	want := slices.Sorted(slices.Values(lines))
	harness.Eventually(t, within, func() error {
		stored := shards(t, cp)
		if len(stored) != count {
			return fmt.Errorf("%d shards, want %d", len(stored), count)
		}
		var got []string
		for i := range count {
			cm := stored[tunnelnodes.ShardName(tunnelnodes.ConfigMapName, count, i)]
			if cm == nil {
				return fmt.Errorf("shard %d of %d missing", i, count)
			}
			if a := cm.Annotations[tunnelnodes.ShardAnnotation]; a != tunnelnodes.FormatShard(i, count) {
				return fmt.Errorf("shard %s annotated %q", cm.Name, a)
			}
			text := cm.Data[tunnelnodes.ConfigMapKey]
			if text == "" {
				continue
			}
			for _, line := range strings.Split(text, "\n") {
				_, name, _ := strings.Cut(line, "\t")
				if tunnelnodes.ShardOf(name, count) != i {
					return fmt.Errorf("%s in shard %d of %d", name, i, count)
				}
				got = append(got, line)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("shards hold %d lines, want %d", len(got), len(want))
		}
		return nil
	})
}

// applyShards writes lines as the sync would (tunnelnodes' shard contract),
// each shard annotated for tunnelIP; shards that hold the same keep their
// content. It returns the shard count.
func applyShards(t harness.TB, cp *harness.ControlPlane, lines []string, tunnelIP string) int {
	t.Helper()
	count := tunnelnodes.ShardCount(len(lines), 0)
	groups := make([][]string, count)
	for _, line := range lines {
		_, name, _ := strings.Cut(line, "\t")
		i := tunnelnodes.ShardOf(name, count)
		groups[i] = append(groups[i], line)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for i, group := range groups {
		cp.ApplyConfigMap(t, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.ShardsNamespace, Name: tunnelnodes.ShardName(tunnelnodes.ConfigMapName, count, i),
				Labels: map[string]string{tunnelnodes.RecordsOfLabel: tunnelnodes.ConfigMapName},
				Annotations: map[string]string{tunnelnodes.ShardAnnotation: tunnelnodes.FormatShard(i, count),
					tunnelnodes.TunnelClusterIPsAnnotation: tunnelIP, tunnelnodes.LastChangeTriggerTimeAnnotation: now}},
			Data: map[string]string{tunnelnodes.ConfigMapKey: strings.Join(slices.Sorted(slices.Values(group)), "\n")},
		})
	}
	return count
}

// edgeNodes creates edge nodes edge-FROM..edge-TO-1 and returns their lines.
func edgeNodes(t *testing.T, cp *harness.ControlPlane, from, to int, tunnelIP string) []string {
	var lines []string
	for i := from; i < to; i++ {
		name := fmt.Sprintf("edge-%03d", i)
		cp.CreateNode(t, harness.Node{Name: name, InternalIP: fmt.Sprintf("192.168.1.%d", i), Edge: true})
		lines = append(lines, tunnelIP+"\t"+name)
	}
	return lines
}

// TestShardsFollowChangesAndReshard: the sync writes the records as a
// shard set and keeps the single ConfigMap byte-identical to their union;
// coredns-yurt serves the single ConfigMap until a set is complete, then
// the set. Hand-deleted and hand-edited shards are repaired, and a set that
// doubles never loses a name while the names move (a prober asks one every
// few milliseconds throughout).
func TestShardsFollowChangesAndReshard(t *testing.T) {
	ctx := context.Background()
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	lines := edgeNodes(t, cp, 0, 40, "10.96.0.9")

	// Before the shards' namespace exists: the single ConfigMap only, and
	// coredns-yurt serves it.
	sync := harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")
	expectRecords(t, syncBudget, cp, slices.Sorted(slices.Values(lines))...)
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, shardsCorefile)
	expectAnswer(t, time.Second, dns.DNSAddr, "edge-007", "A", "10.96.0.9")
	if got := harness.Metric(t, dns.MetricsURL, `coredns_yurthosts_shards{configmap="kube-system/yurt-tunnel-nodes"}`); got != 0 {
		t.Errorf("shards served before any exist: %v", got)
	}
	harness.Eventually(t, 5*time.Second, func() error {
		if got := harness.Metric(t, sync.MetricsURL, `tunnel_nodes_sync_errors_total{reason="no_shards_namespace"}`); got < 1 {
			return fmt.Errorf("no_shards_namespace errors = %v", got)
		}
		return nil
	})

	// The namespace appears (install's records step): within the sync's
	// retry, 40 names make a set of 4 (10 each), and coredns-yurt moves to it.
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.ShardsNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.CreateNode(t, harness.Node{Name: "edge-040", InternalIP: "192.168.1.40", Edge: true}) // a change: no waiting for the retry
	lines = append(lines, "10.96.0.9\tedge-040")
	expectShardSet(t, 5*time.Second, cp, 4, lines)
	harness.Eventually(t, time.Second, func() error {
		if got := harness.Metric(t, dns.MetricsURL, `coredns_yurthosts_shards{configmap="kube-system/yurt-tunnel-nodes"}`); got != 4 {
			return fmt.Errorf("coredns-yurt serves %v shards, want 4", got)
		}
		return nil
	})
	expectAnswer(t, time.Second, dns.DNSAddr, "edge-040", "A", "10.96.0.9")

	// A shard edited by hand is put right (its names answer wrong until then:
	// no reader can tell a hand edit from the sync's).
	victim := tunnelnodes.ShardName(tunnelnodes.ConfigMapName, 4, tunnelnodes.ShardOf("edge-013", 4))
	edited := shards(t, cp)[victim]
	edited.Data[tunnelnodes.ConfigMapKey] = "1.2.3.4\tbogus"
	if _, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.ShardsNamespace).Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectShardSet(t, syncBudget, cp, 4, lines)

	// From now on one name is asked without pause: it must always answer.
	stopProber := probeName(t, dns.DNSAddr, "edge-013", "10.96.0.9")

	// A shard deleted by hand comes back; meanwhile the set is incomplete
	// and its names answer from the single ConfigMap.
	if err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.ShardsNamespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectShardSet(t, syncBudget, cp, 4, lines)

	// 70 names average 17.5 over 4: the set doubles to 8 (whole, then the
	// old one goes), and every name keeps answering.
	lines = append(lines, edgeNodes(t, cp, 41, 70, "10.96.0.9")...)
	expectShardSet(t, 5*time.Second, cp, 8, lines)
	expectAnswer(t, time.Second, dns.DNSAddr, "edge-069", "A", "10.96.0.9")
	// The single ConfigMap is still their union, byte for byte.
	expectRecords(t, syncBudget, cp, slices.Sorted(slices.Values(lines))...)

	// A node change rewrites one shard, not the set.
	before := harness.Metric(t, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="shard"}`)
	stopProber() // its name is about to change on purpose
	updateNode(t, cp, "edge-013", func(n *corev1.Node) { n.Labels[tunnelnodes.EdgeNodeLabel] = "false" }, false)
	expectAnswer(t, time.Second, dns.DNSAddr, "edge-013", "A", "192.168.1.13")
	if got, ok := harness.WaitMetric(t, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="shard"}`, func(n float64) bool { return n-before == 1 }); !ok {
		t.Errorf("one node change wrote %v shards, want 1", got-before)
	}
}

// probeName asks server for name's A without pause, one try with a 2 s
// timeout each, until the returned stop (also a cleanup) says how many
// queries failed to answer want; any failure fails the test.
func probeName(t *testing.T, server, name, want string) (stop func()) {
	var asked, failed atomic.Int64
	var lastFailure atomic.Value
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			default:
			}
			err := answers(server, name+".", dns.TypeA, want)
			asked.Add(1)
			if err != nil {
				failed.Add(1)
				lastFailure.Store(err.Error())
			}
		}
	}()
	var once gosync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			<-ended
			t.Logf("prober: %d queries for %s, %d failed", asked.Load(), name, failed.Load())
			if failed.Load() > 0 {
				t.Errorf("%d of %d queries for %s failed; last: %v", failed.Load(), asked.Load(), name, lastFailure.Load())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestShardsWithoutSingleConfigMap: --single-configmap=false writes only
// the shards, and coredns-yurt, started after, serves them.
func TestShardsWithoutSingleConfigMap(t *testing.T) {
	ctx := context.Background()
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.ShardsNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := edgeNodes(t, cp, 0, 20, "10.96.0.9")
	harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false", "--single-configmap=false")
	expectShardSet(t, 5*time.Second, cp, 2, lines)
	if _, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{}); err == nil {
		t.Error("the single ConfigMap was written with --single-configmap=false")
	}
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, shardsCorefile)
	for _, name := range []string{"edge-000", "edge-019"} {
		expectAnswer(t, time.Second, dns.DNSAddr, name, "A", "10.96.0.9")
	}
}
