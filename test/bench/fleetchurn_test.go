package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// bareInformerEnv, set to a kubeconfig, makes the test binary a bare
// client-go Node informer instead (TestMain): the reference the sync's CPU
// per status update is measured against, in a process of its own.
const bareInformerEnv = "YURTDNS_BENCH_BARE_INFORMER"

func TestMain(m *testing.M) {
	if kubeconfig := os.Getenv(bareInformerEnv); kubeconfig != "" {
		if err := runBareInformer(kubeconfig); err != nil {
			fmt.Fprintln(os.Stderr, "bare informer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runBareInformer runs a shared informer of every Node, in protobuf as the
// sync watches them, with an event handler that does nothing, until
// SIGTERM; it prints "synced" once the first list is in.
func runBareInformer(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	factory := informers.NewSharedInformerFactory(c, 0)
	nodes := factory.Core().V1().Nodes().Informer()
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) {}}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.HasSynced) {
		return context.Cause(ctx)
	}
	fmt.Println("synced")
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// startBareInformer runs the bare informer against kubeconfig and waits
// for its first list.
func startBareInformer(b *testing.B, kubeconfig string) *harness.Process {
	b.Helper()
	b.Setenv(bareInformerEnv, kubeconfig)
	p := harness.StartProcess(b, os.Args[0], "-test.run=^$")
	b.Setenv(bareInformerEnv, "")
	start := time.Now()
	for !strings.Contains(p.Output(), "synced\n") {
		if p.Exited() || time.Since(start) > 5*time.Minute {
			b.Fatalf("the bare informer did not sync: %s", p.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p
}

// statusChurn patches the Ready condition's heartbeat of node after node,
// round robin, at a steady rate, as each kubelet does every 5 minutes
// (--node-status-report-frequency): 333 a second at 100,000 nodes. No
// record changes.
type statusChurn struct {
	done    atomic.Int64
	failed  atomic.Int64
	dropped atomic.Int64
	stop    func()
}

func startStatusChurn(b *testing.B, cfg *rest.Config, nodes, perSecond int) *statusChurn {
	b.Helper()
	c := protobufClient(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	s := &statusChurn{}
	work := make(chan int, perSecond)
	var wg gosync.WaitGroup
	const writers = 16
	for range writers {
		wg.Go(func() {
			for i := range work {
				patch := fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q}]}}`,
					time.Now().UTC().Format(time.RFC3339))
				if _, err := c.CoreV1().Nodes().Patch(ctx, fleetNode(i), types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
					if ctx.Err() == nil {
						s.failed.Add(1)
					}
					continue
				}
				s.done.Add(1)
			}
		})
	}
	wg.Go(func() {
		defer close(work)
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for next := 0; ; next = (next + 1) % nodes {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			select {
			case work <- next:
			default:
				s.dropped.Add(1) // the writers fell behind: counted, not queued
			}
		}
	})
	s.stop = func() { cancel(); wg.Wait() }
	return s
}

// setEdge makes node name an edge node or not, in one request (a merge
// patch of its label), and returns the address its name must answer then.
func setEdge(b testing.TB, c kubernetes.Interface, i int, edge bool) string {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, tunnelnodes.EdgeNodeLabel, fmt.Sprint(edge))
	if _, err := c.CoreV1().Nodes().Patch(context.Background(), fleetNode(i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		b.Error(err)
	}
	if edge {
		return tunnelIP
	}
	return fleetIP(i)
}

// protobufClient is an unthrottled client that reads Nodes as protobuf, as
// the kubelets and controllers writing them do: JSON would spend the cores
// the apiserver and the sync share with it on encoding 15 KB Nodes.
func protobufClient(cfg *rest.Config) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	return kubernetes.NewForConfigOrDie(cfg)
}

// isEdge reads whether node i is an edge node now.
func isEdge(b testing.TB, c kubernetes.Interface, i int) bool {
	n, err := c.CoreV1().Nodes().Get(context.Background(), fleetNode(i), metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return n.Labels[tunnelnodes.EdgeNodeLabel] == "true"
}

// fleetChurnRun is what measureFleetChurn measures.
type fleetChurnRun struct {
	rate                          float64 // status updates a second, achieved
	window                        time.Duration
	updates                       int64
	syncCPU, informerCPU          time.Duration // in the window
	windowShardWrites             float64
	answer                        []time.Duration // change → answer, sorted
	fullSync, changeSync          time.Duration   // the sync's time: in its start-up full sync, in syncs per change
	changeShardWrites             float64
	burst                         int
	burstWritten, burstAnswered   time.Duration
	burstShards                   int // distinct shards the burst's nodes live in
	burstShardWrites              float64
	rss, peakRSS, heap            float64 // MiB, at the end
	gomemlimit                    string
	failedUpdates, droppedUpdates int64
}

func (r fleetChurnRun) perUpdate(cpu time.Duration) float64 {
	return float64(cpu.Microseconds()) / float64(max(r.updates, 1))
}

// cpuRatio is the sync's CPU over the bare informer's, same updates.
func (r fleetChurnRun) cpuRatio() float64 { return float64(r.syncCPU) / float64(max(r.informerCPU, 1)) }

func (r fleetChurnRun) fields() map[string]any {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return map[string]any{"status_updates_per_s": r.rate, "window_s": r.window.Seconds(), "updates": r.updates,
		"sync_cpu_us_per_update": r.perUpdate(r.syncCPU), "informer_cpu_us_per_update": r.perUpdate(r.informerCPU),
		"cpu_ratio": r.cpuRatio(), "window_shard_writes": r.windowShardWrites,
		"changes": len(r.answer), "answer_p50_ms": ms(percentile(r.answer, 0.5)), "answer_p99_ms": ms(percentile(r.answer, 0.99)),
		"answer_max_ms": ms(percentile(r.answer, 1)), "full_sync_ms": ms(r.fullSync), "change_sync_ms": ms(r.changeSync), "change_shard_writes": r.changeShardWrites,
		"burst": r.burst, "burst_written_ms": ms(r.burstWritten), "burst_answered_ms": ms(r.burstAnswered), "burst_shards": r.burstShards, "burst_shard_writes": r.burstShardWrites,
		"rss_mib": r.rss, "peak_rss_mib": r.peakRSS, "heap_mib": r.heap, "gomemlimit": r.gomemlimit,
		"failed_updates": r.failedUpdates, "dropped_updates": r.droppedUpdates}
}

// Status churn: kubelets' heartbeats at 100,000 nodes, and what the sync
// does under them.
const (
	churnStatusPerSecond = 333
	churnWindow          = 30 * time.Second
	churnChanges         = 20
	churnBurst           = 1000
)

// measureFleetChurn runs today's sync (its deployed GOMEMLIMIT) and a bare
// informer over the n nodes, side by side, under churnStatusPerSecond
// status updates: the CPU each spends per update over churnWindow (no
// other change), then churnChanges node changes one at a time, each timed
// from the API write to srv's answer, then churnBurst changes at once,
// timed until srv answers them all; and the sync's shard writes.
func measureFleetChurn(b *testing.B, cp *harness.ControlPlane, c kubernetes.Interface, srv *harness.CoreDNS, n int, rng *rand.Rand) fleetChurnRun {
	b.Helper()
	run := fleetChurnRun{gomemlimit: deployedGOMEMLIMIT(b)}
	b.Setenv("GOMEMLIMIT", run.gomemlimit)
	// -v=1: each write is logged, with the sync that made it.
	sync := harness.StartSyncBinary(b, harness.Binary(b, "tunnel-nodes-sync"), 5*time.Minute, cp.Kubeconfig, "--leader-elect=false", "--v=1")
	b.Setenv("GOMEMLIMIT", "off")
	defer sync.Stop()
	for harness.Metric(b, sync.MetricsURL, "tunnel_nodes_sync_last_success_timestamp_seconds") <= 0 {
		time.Sleep(100 * time.Millisecond) // the start-up full sync
	}
	// syncTime is the sync's time in syncs so far, and their number.
	syncTime := func() (time.Duration, float64) {
		return time.Duration(harness.Metric(b, sync.MetricsURL, "tunnel_nodes_sync_sync_duration_seconds_sum") * float64(time.Second)),
			harness.Metric(b, sync.MetricsURL, "tunnel_nodes_sync_sync_duration_seconds_count")
	}
	fullTime, fullSyncs := syncTime()
	run.fullSync = fullTime / time.Duration(fullSyncs)
	informer := startBareInformer(b, cp.Kubeconfig)
	defer informer.Stop()
	shardWrites := func() float64 {
		return harness.Metric(b, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="shard"}`)
	}

	churn := startStatusChurn(b, cp.Config, n, churnStatusPerSecond)
	defer churn.stop()
	time.Sleep(5 * time.Second) // both watches at the churn's pace
	writes, updates := shardWrites(), churn.done.Load()
	syncCPU, informerCPU := processCPU(b, sync.Pid()), processCPU(b, informer.Pid())
	start := time.Now()
	time.Sleep(churnWindow)
	run.syncCPU, run.informerCPU = processCPU(b, sync.Pid())-syncCPU, processCPU(b, informer.Pid())-informerCPU
	run.window = time.Since(start)
	run.updates = churn.done.Load() - updates
	run.rate = float64(run.updates) / run.window.Seconds()
	run.windowShardWrites = shardWrites() - writes
	informer.Stop()

	// One change at a time, nodes of their own.
	nodes := rng.Perm(n)[:churnChanges+churnBurst]
	writes = shardWrites()
	timeBefore, _ := syncTime()
	logged := len(sync.Output())
	for _, i := range nodes[:churnChanges] {
		edge := isEdge(b, c, i)
		time.Sleep(time.Duration(rng.Int64N(int64(100 * time.Millisecond))))
		changed := time.Now()
		want := setEdge(b, c, i, !edge)
		run.answer = append(run.answer, waitForAnswer(b, srv.DNSAddr, fleetNode(i), want, changed))
	}
	slices.Sort(run.answer)
	time.Sleep(time.Second) // a write after the answer would show
	run.changeShardWrites = shardWrites() - writes
	if run.changeShardWrites != churnChanges {
		count := int(harness.Metric(b, sync.MetricsURL, "tunnel_nodes_sync_shards"))
		var shards []int
		for _, i := range nodes[:churnChanges] {
			shards = append(shards, tunnelnodes.ShardOf(fleetNode(i), count))
		}
		b.Logf("%v shard writes for %d changes, in shards %v; the sync logged:\n%s", run.changeShardWrites, churnChanges, shards, sync.Output()[logged:])
	}
	timeAfter, _ := syncTime()
	run.changeSync = (timeAfter - timeBefore) / churnChanges

	run.burst = len(nodes[churnChanges:])
	run.burstWritten, run.burstAnswered, run.burstShards, run.burstShardWrites = changeBurst(b, cp.Config, sync, srv, nodes[churnChanges:])
	run.failedUpdates, run.droppedUpdates = churn.failed.Load(), churn.dropped.Load()
	run.rss, run.peakRSS = float64(vmRSS(b, sync.Pid()))/1024, float64(vmHWM(b, sync.Pid()))/1024
	run.heap = harness.Metric(b, sync.MetricsURL, "go_memstats_heap_inuse_bytes") / (1 << 20)
	return run
}

// changeBurst flips the edge label of nodes, all at once (32 writers), and
// returns the time until the API took every write and until srv answers
// each name as its node says (8 askers, each name asked every 10 ms once the
// API took its write, a minute at most: asking every millisecond, as one
// change at a time is timed, takes the cores the apiserver needs), the shards the nodes live in, and the
// sync's shard writes. Each write is an Update of the Node, read before,
// sent as protobuf, as controllers relabel nodes: a JSON merge patch costs
// the apiserver, on the cores it shares with the sync here, a JSON round
// trip of every 12 KB Node, and the 1,000 took it 4.8 s where the sync
// answered the last 0.2 s after it.
func changeBurst(b *testing.B, cfg *rest.Config, sync *harness.Sync, srv *harness.CoreDNS, nodes []int) (written, answered time.Duration, shards int, writes float64) {
	b.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	c := protobufClient(cfg)
	shardWrites := func() float64 {
		return harness.Metric(b, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="shard"}`)
	}
	count := int(harness.Metric(b, sync.MetricsURL, "tunnel_nodes_sync_shards"))
	wants := make([]string, len(nodes))
	objects := make([]*corev1.Node, len(nodes))
	inShard := map[int]bool{}
	for k, i := range nodes {
		n, err := c.CoreV1().Nodes().Get(context.Background(), fleetNode(i), metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		edge := n.Labels[tunnelnodes.EdgeNodeLabel] != "true"
		n.Labels[tunnelnodes.EdgeNodeLabel] = fmt.Sprint(edge)
		// No precondition: the status churn's writes in between are not
		// conflicts (an Update of a Node keeps its status as stored).
		n.ResourceVersion = ""
		objects[k] = n
		wants[k] = fleetIP(i)
		if edge {
			wants[k] = tunnelIP
		}
		inShard[tunnelnodes.ShardOf(fleetNode(i), count)] = true
	}
	before := shardWrites()
	var writers, askers gosync.WaitGroup
	var last atomic.Int64
	// A name is asked once the API took its write: asking before only
	// takes the cores the apiserver needs for the rest of the burst.
	taken := make([]chan struct{}, len(nodes))
	for k := range taken {
		taken[k] = make(chan struct{})
	}
	changed := time.Now()
	for w := range 32 {
		writers.Go(func() {
			for k := w; k < len(nodes); k += 32 {
				if _, err := c.CoreV1().Nodes().Update(context.Background(), objects[k], metav1.UpdateOptions{}); err != nil {
					b.Error(err)
				}
				close(taken[k])
			}
		})
	}
	for a := range 8 {
		askers.Go(func() {
			for k := a; k < len(nodes); k += 8 {
				<-taken[k]
				d := waitForAnswerWithin(b, srv.DNSAddr, fleetNode(nodes[k]), wants[k], changed, time.Minute, 10*time.Millisecond)
				for prev := last.Load(); int64(d) > prev && !last.CompareAndSwap(prev, int64(d)); prev = last.Load() {
				}
			}
		})
	}
	writers.Wait()
	written = time.Since(changed)
	askers.Wait()
	time.Sleep(time.Second) // a write after the answers would show
	return written, time.Duration(last.Load()), len(inShard), shardWrites() - before
}
