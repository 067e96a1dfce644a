package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// createNodes creates n nodes, one in ten a cloud node with an InternalIP,
// the rest edge nodes, with 16 writers in parallel.
func createNodes(b *testing.B, c kubernetes.Interface, n int) {
	b.Helper()
	ctx := context.Background()
	var wg gosync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				node := harness.Node{Name: fmt.Sprintf("edge-%06d", i), Edge: true}
				if i%10 == 0 {
					node = harness.Node{Name: fmt.Sprintf("cloud-%06d", i), InternalIP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}
				}
				obj := node.Object()
				created, err := c.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{})
				if err == nil && len(obj.Status.Addresses) > 0 {
					created.Status.Addresses = obj.Status.Addresses
					_, err = c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// recordLines counts the lines of the records ConfigMap.
func recordLines(c kubernetes.Interface) int {
	cm, err := c.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(context.Background(), tunnelnodes.ConfigMapName, metav1.GetOptions{})
	if err != nil || cm.Data[tunnelnodes.ConfigMapKey] == "" {
		return 0
	}
	return strings.Count(cm.Data[tunnelnodes.ConfigMapKey], "\n") + 1
}

// BenchmarkSyncConvergence: from process start to the records of every node
// written, for 10k and 30k nodes on the real apiserver, and the sync's
// resident memory once converged.
func BenchmarkSyncConvergence(b *testing.B) {
	sizes := []int{10000, 30000}
	if testing.Short() {
		sizes = []int{2000}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			cp := harness.Start(b, harness.Options{})
			c := cp.UnthrottledClient()
			cp.CreateService(b, harness.TunnelService(tunnelIP))
			createNodes(b, c, n)
			harness.Binary(b, "tunnel-nodes-sync") // build outside the timed window
			start := time.Now()
			s := harness.StartSync(b, cp.Kubeconfig, "--leader-elect=false")
			for recordLines(c) < n {
				if time.Since(start) > 2*time.Minute {
					b.Fatalf("only %d of %d records after 2 minutes", recordLines(c), n)
				}
				time.Sleep(5 * time.Millisecond)
			}
			converged := time.Since(start)
			time.Sleep(2 * time.Second)
			rss := vmRSS(b, s.Pid())
			heap := harness.Metric(b, s.MetricsURL, "go_memstats_heap_inuse_bytes") / (1 << 20)
			b.ReportMetric(float64(converged.Milliseconds()), "ms-start-to-written")
			b.ReportMetric(float64(rss)/1024, "MiB-rss")
			b.ReportMetric(heap, "MiB-heap-inuse")
			harness.RecordResults(b, fmt.Sprintf("sync-convergence-%d", n), map[string]any{"nodes": n, "written_ms": converged.Milliseconds(),
				"rss_mib": float64(rss) / 1024, "heap_inuse_mib": heap})
			b.Logf("%d nodes: start to ConfigMap written %s; RSS %.1f MiB, Go heap in use %.1f MiB", n, converged, float64(rss)/1024, heap)
		})
	}
}

// watchRecords reports each new records text as it is stored.
func watchRecords(b *testing.B, c kubernetes.Interface) (<-chan string, func()) {
	b.Helper()
	w, err := c.CoreV1().ConfigMaps(tunnelnodes.Namespace).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", tunnelnodes.ConfigMapName).String()})
	if err != nil {
		b.Fatal(err)
	}
	out := make(chan string, 1024)
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted {
				out <- cm.Data[tunnelnodes.ConfigMapKey]
			}
		}
	}()
	return out, w.Stop
}

// BenchmarkSyncNodeChange: one node change (an edge label flipped) to the
// records ConfigMap updated, 100 times, with the default 50 ms debounce.
func BenchmarkSyncNodeChange(b *testing.B) {
	cp := harness.Start(b, harness.Options{})
	c := cp.UnthrottledClient()
	ctx := context.Background()
	cp.CreateService(b, harness.TunnelService(tunnelIP))
	createNodes(b, c, 1000)
	harness.StartSync(b, cp.Kubeconfig, "--leader-elect=false")
	for recordLines(c) < 1000 {
		time.Sleep(10 * time.Millisecond)
	}
	updates, stop := watchRecords(b, c)
	defer stop()
	changes := 100
	if testing.Short() {
		changes = 10
	}
	var lat []time.Duration
	for i := range changes {
		name := fmt.Sprintf("edge-%06d", i*10+1) // never a multiple of 10: an edge node
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		node.Labels[tunnelnodes.EdgeNodeLabel] = "false"
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("172.16.0.%d", i+1)}}
		if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		node, _ = c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		node.Labels[tunnelnodes.EdgeNodeLabel] = "false"
		start := time.Now()
		if _, err := c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		want := fmt.Sprintf("172.16.0.%d\t%s", i+1, name)
		for text := range updates {
			if strings.Contains(text, want) {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	harness.RecordResults(b, "sync-change", map[string]any{"changes": changes, "p50_ms": float64(percentile(lat, 0.5).Microseconds()) / 1000,
		"p99_ms": float64(percentile(lat, 0.99).Microseconds()) / 1000})
	b.Logf("%d single node changes (1000 nodes, debounce 50ms): p50 %s p99 %s max %s",
		changes, percentile(lat, 0.5), percentile(lat, 0.99), lat[len(lat)-1])
}

// BenchmarkSyncChurn: 1000 node label changes within about a second; count
// the ConfigMap writes they cost.
func BenchmarkSyncChurn(b *testing.B) {
	cp := harness.Start(b, harness.Options{})
	c := cp.UnthrottledClient()
	ctx := context.Background()
	cp.CreateService(b, harness.TunnelService(tunnelIP))
	createNodes(b, c, 1000)
	s := harness.StartSync(b, cp.Kubeconfig, "--leader-elect=false")
	for recordLines(c) < 1000 {
		time.Sleep(10 * time.Millisecond)
	}
	writesBefore := harness.Metric(b, s.MetricsURL, `tunnel_nodes_sync_writes_total{object="configmap"}`)
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var wg gosync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < len(nodes.Items); i += 16 {
				n := nodes.Items[i]
				n.Labels["yurtdns.io/churn"] = "1"
				n.Labels[tunnelnodes.EdgeNodeLabel] = fmt.Sprint(n.Labels[tunnelnodes.EdgeNodeLabel] != "true")
				if _, err := c.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	burst := time.Since(start)
	time.Sleep(time.Second) // let the last debounce window write
	writes := harness.Metric(b, s.MetricsURL, `tunnel_nodes_sync_writes_total{object="configmap"}`) - writesBefore
	b.ReportMetric(writes, "configmap-writes")
	b.ReportMetric(float64(burst.Milliseconds()), "ms-burst")
	b.ReportMetric(writes/burst.Seconds(), "writes/s")
	harness.RecordResults(b, "sync-churn", map[string]any{"changes": len(nodes.Items), "burst_ms": burst.Milliseconds(), "writes": writes})
	b.Logf("%d node changes in %s caused %v ConfigMap writes (%.1f per second of churn)",
		len(nodes.Items), burst, writes, writes/burst.Seconds())
}
