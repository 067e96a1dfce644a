package tunnelsync

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	gosync "sync"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestSyncShardsFinishesAnInterruptedReshard: a sync stopped while writing
// a new set left the old complete set, part of the new one and a stray;
// the next sync writes the set its names call for, whole, deletes every
// other shard, and a sync after that writes nothing.
func TestSyncShardsFinishesAnInterruptedReshard(t *testing.T) {
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9"}}
	objs := []client.Object{svc}
	for i := range 40 {
		n := node(fmt.Sprintf("edge-%02d", i), true, internal(fmt.Sprintf("192.168.0.%d", i)))
		objs = append(objs, &n)
	}
	shard := func(name, annotation string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.ShardsNamespace, Name: name,
			Labels:      map[string]string{tunnelnodes.RecordsOfLabel: tunnelnodes.ConfigMapName},
			Annotations: map[string]string{tunnelnodes.ShardAnnotation: annotation}}}
	}
	objs = append(objs,
		shard("yurt-tunnel-nodes-1-0", "0/1"),   // the old complete set
		shard("yurt-tunnel-nodes-8-3", "3/8"),   // part of an unfinished set
		shard("yurt-tunnel-nodes-stray", "0/1"), // name and annotation disagree
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ // not a shard: kept
			Namespace: tunnelnodes.ShardsNamespace, Name: "unrelated"}})
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	r := yurtTunnelReconciler(t, c)
	r.cfg.ShardsNamespace = tunnelnodes.ShardsNamespace

	stored := func() (names []string, rvs map[string]string) {
		var list corev1.ConfigMapList
		if err := c.List(ctx, &list, client.InNamespace(tunnelnodes.ShardsNamespace)); err != nil {
			t.Fatal(err)
		}
		rvs = map[string]string{}
		for _, cm := range list.Items {
			names = append(names, cm.Name)
			rvs[cm.Name] = cm.ResourceVersion
		}
		slices.Sort(names)
		return names, rvs
	}
	if _, err := r.Reconcile(ctx, syncRequest); err != nil {
		t.Fatal(err)
	}
	// 40 names: 4 shards of 10 on average.
	want := []string{"unrelated", "yurt-tunnel-nodes-4-0", "yurt-tunnel-nodes-4-1", "yurt-tunnel-nodes-4-2", "yurt-tunnel-nodes-4-3"}
	names, rvs := stored()
	if !slices.Equal(names, want) {
		t.Fatalf("shards %v, want %v", names, want)
	}
	if _, err := r.Reconcile(ctx, syncRequest); err != nil {
		t.Fatal(err)
	}
	if _, again := stored(); fmt.Sprint(again) != fmt.Sprint(rvs) {
		t.Errorf("nothing changed, but shards were written: %v -> %v", rvs, again)
	}
}

// shardFixture is the sync of 40 edge nodes (edge-00…edge-39) into shards
// and the single ConfigMap, after its first full sync: a set of 4.
type shardFixture struct {
	ctx    context.Context
	client client.Client
	r      *Reconciler
}

func newShardFixture(t *testing.T) *shardFixture {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9"}}
	objs := []client.Object{svc}
	for i := range 40 {
		n := node(fmt.Sprintf("edge-%02d", i), true, internal(fmt.Sprintf("192.168.0.%d", i)))
		objs = append(objs, &n)
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	f := &shardFixture{ctx: context.Background(), client: c, r: yurtTunnelReconciler(t, c)}
	f.r.cfg.ShardsNamespace = tunnelnodes.ShardsNamespace
	f.reconcile(t, syncRequest)
	if got := f.r.shards.count(); got != 4 {
		t.Fatalf("a set of %d after the first sync, want 4", got)
	}
	return f
}

func (f *shardFixture) reconcile(t *testing.T, req reconcile.Request) {
	t.Helper()
	if _, err := f.r.Reconcile(f.ctx, req); err != nil {
		t.Fatalf("Reconcile %s: %v", req, err)
	}
}

// stored is the resourceVersion of every shard and of the single ConfigMap.
func (f *shardFixture) stored(t *testing.T) map[string]string {
	t.Helper()
	var list corev1.ConfigMapList
	if err := f.client.List(f.ctx, &list); err != nil {
		t.Fatal(err)
	}
	rvs := map[string]string{}
	for _, cm := range list.Items {
		rvs[cm.Name] = cm.ResourceVersion
	}
	return rvs
}

// changedSince names the ConfigMaps written (or gone) since rvs, sorted.
func (f *shardFixture) changedSince(t *testing.T, rvs map[string]string) []string {
	t.Helper()
	now := f.stored(t)
	var changed []string
	for name, rv := range now {
		if rvs[name] != rv {
			changed = append(changed, name)
		}
	}
	for name := range rvs {
		if _, ok := now[name]; !ok {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	return changed
}

// TestSyncShard: a node's change rewrites its shard alone (and the single
// ConfigMap, through its own key), leaving what a full sync would; a key of
// an older set, or a change that resizes the set, takes the full sync.
func TestSyncShard(t *testing.T) {
	shardOf := func(name string, count int) string {
		return tunnelnodes.ShardName(tunnelnodes.ConfigMapName, count, tunnelnodes.ShardOf(name, count))
	}
	for _, tc := range []struct {
		name string
		// change changes the store and returns the key(s) to sync.
		change func(t *testing.T, s *nodeStore, r *Reconciler) []reconcile.Request
		want   func() []string // the ConfigMaps written
		count  int             // the set's size after
	}{{
		name: "no longer edge",
		change: func(t *testing.T, s *nodeStore, r *Reconciler) []reconcile.Request {
			n := node("edge-07", false, internal("192.168.0.7"))
			must(t, s.Update(&n))
			return []reconcile.Request{r.shardRequest(tunnelnodes.ShardOf(n.Name, 4), 4), r.singleRequest()}
		},
		want:  func() []string { return []string{tunnelnodes.ConfigMapName, shardOf("edge-07", 4)} },
		count: 4,
	}, {
		name: "deleted",
		change: func(t *testing.T, s *nodeStore, r *Reconciler) []reconcile.Request {
			n := node("edge-12", true)
			must(t, s.Delete(&n))
			return []reconcile.Request{r.shardRequest(tunnelnodes.ShardOf(n.Name, 4), 4), r.singleRequest()}
		},
		want:  func() []string { return []string{tunnelnodes.ConfigMapName, shardOf("edge-12", 4)} },
		count: 4,
	}, {
		name: "a status update (the key synced anyway)",
		change: func(t *testing.T, s *nodeStore, r *Reconciler) []reconcile.Request {
			n := node("edge-03", true, internal("192.168.0.3"))
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			must(t, s.Update(&n))
			return []reconcile.Request{r.shardRequest(tunnelnodes.ShardOf(n.Name, 4), 4), r.singleRequest()}
		},
		want:  func() []string { return nil },
		count: 4,
	}, {
		name: "the key of an older set",
		change: func(t *testing.T, s *nodeStore, r *Reconciler) []reconcile.Request {
			n := node("edge-21", false, internal("192.168.1.21"))
			must(t, s.Update(&n))
			return []reconcile.Request{r.shardRequest(tunnelnodes.ShardOf(n.Name, 8), 8)}
		},
		want:  func() []string { return []string{tunnelnodes.ConfigMapName, shardOf("edge-21", 4)} },
		count: 4,
	}, {
		name: "the set outgrows its size",
		change: func(t *testing.T, s *nodeStore, r *Reconciler) []reconcile.Request {
			// 70 names: over 4 shards of 16 once the last shard's sync counts them.
			keys := map[reconcile.Request]bool{}
			for i := 40; i < 70; i++ {
				n := node(fmt.Sprintf("edge-%02d", i), true, internal(fmt.Sprintf("192.168.0.%d", i)))
				must(t, s.Add(&n))
				keys[r.shardRequest(tunnelnodes.ShardOf(n.Name, 4), 4)] = true
			}
			return slices.Collect(maps.Keys(keys))
		},
		want: func() []string {
			names := []string{tunnelnodes.ConfigMapName}
			for i := range 4 {
				names = append(names, tunnelnodes.ShardName(tunnelnodes.ConfigMapName, 4, i))
			}
			for i := range 8 {
				names = append(names, tunnelnodes.ShardName(tunnelnodes.ConfigMapName, 8, i))
			}
			slices.Sort(names)
			return names
		},
		count: 8,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newShardFixture(t)
			before, writes := f.stored(t), shardWrites()
			for _, req := range tc.change(t, f.r.nodes, f.r) {
				f.reconcile(t, req)
			}
			if got, want := f.changedSince(t, before), tc.want(); !slices.Equal(got, want) {
				t.Errorf("written %v, want %v", got, want)
			}
			// Each shard written once. A set that is resized is also written
			// by the shard syncs before the one that resizes it: not counted.
			if got, want := shardWrites()-writes, len(shardsIn(tc.want())); tc.count == 4 && got != want {
				t.Errorf("%d shard writes, want %d", got, want)
			}
			if got := f.r.shards.count(); got != tc.count {
				t.Errorf("a set of %d, want %d", got, tc.count)
			}
			// What the shard's sync left is what the full sync computes.
			after := f.stored(t)
			f.reconcile(t, syncRequest)
			if again := f.changedSince(t, after); len(again) != 0 {
				t.Errorf("the full sync after it wrote %v", again)
			}
		})
	}
}

// TestShardSyncsInParallel: shard syncs run side by side with each other,
// with the single ConfigMap's and with a full sync (go test -race), and
// leave what a full sync computes.
func TestShardSyncsInParallel(t *testing.T) {
	f := newShardFixture(t)
	var reqs []reconcile.Request
	for i := range 4 {
		reqs = append(reqs, f.r.shardRequest(i, 4))
	}
	reqs = append(reqs, f.r.singleRequest(), syncRequest)
	before, writes := f.stored(t), shardWrites()
	for i := range 40 {
		n := node(fmt.Sprintf("edge-%02d", i), i%3 == 0, internal(fmt.Sprintf("192.168.2.%d", i)))
		must(t, f.r.nodes.Update(&n))
	}
	var wg gosync.WaitGroup
	for _, req := range reqs {
		wg.Go(func() {
			if _, err := f.r.Reconcile(f.ctx, req); err != nil {
				t.Errorf("Reconcile %s: %v", req, err)
			}
		})
	}
	wg.Wait()
	if got, want := shardWrites()-writes, len(shardsIn(f.changedSince(t, before))); got != want {
		t.Errorf("%d shard writes, %d shards changed", got, want)
	}
	after := f.stored(t)
	f.reconcile(t, syncRequest)
	if again := f.changedSince(t, after); len(again) != 0 {
		t.Errorf("the full sync after them wrote %v", again)
	}
}

// shardWrites is the sync's shard writes so far (writes_total{object="shard"}).
func shardWrites() int { return int(testutil.ToFloat64(writesTotal.WithLabelValues("shard"))) }

// shardsIn are the shards among ConfigMap names.
func shardsIn(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == tunnelnodes.ConfigMapName })
}

// TestNodeChangedKeys: what a node's change enqueues.
func TestNodeChangedKeys(t *testing.T) {
	const name = "edge-07"
	r := &Reconciler{cfg: Config{Namespace: tunnelnodes.Namespace, ConfigMap: tunnelnodes.ConfigMapName}}
	shard := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: tunnelnodes.ShardsNamespace,
		Name: tunnelnodes.ShardName(tunnelnodes.ConfigMapName, 4, tunnelnodes.ShardOf(name, 4))}}
	for _, tc := range []struct {
		name       string
		shards     string // the shards' namespace
		set        int    // the set written
		skipSingle bool
		node       string
		want       []reconcile.Request
	}{
		{"shards off", "", 0, false, name, []reconcile.Request{syncRequest}},
		{"no set written yet", tunnelnodes.ShardsNamespace, 0, false, name, []reconcile.Request{syncRequest}},
		{"a set of 4", tunnelnodes.ShardsNamespace, 4, false, name, []reconcile.Request{shard, r.singleRequest()}},
		{"a set of 4, no single ConfigMap", tunnelnodes.ShardsNamespace, 4, true, name, []reconcile.Request{shard}},
		{"a list", tunnelnodes.ShardsNamespace, 4, false, "", []reconcile.Request{syncRequest}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{cfg: r.cfg}
			r.cfg.ShardsNamespace, r.cfg.SkipSingleConfigMap = tc.shards, tc.skipSingle
			r.shards.reset(make([]recordCounts, tc.set), make([]string, tc.set))
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			r.nodeChanged(q, tc.node)
			var got []reconcile.Request
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("enqueued %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTriggerClock: each key has its own first change since its last sync,
// and its own debounce.
func TestTriggerClock(t *testing.T) {
	const delay = 50 * time.Millisecond
	a, b := reconcile.Request{NamespacedName: types.NamespacedName{Name: "a"}}, reconcile.Request{NamespacedName: types.NamespacedName{Name: "b"}}
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var c triggerClock
	for _, step := range []struct {
		name     string
		do       func() time.Duration // a wait, or a trigger time as its offset from t0
		want     time.Duration
		wantSync bool // want is a wait: at most zero means at once
	}{
		{"a's first change: at once", func() time.Duration { return c.mark(a, at(0), delay) }, 0, true},
		{"a's second change before its sync", func() time.Duration { return c.mark(a, at(5), delay) }, 0, true},
		{"a's sync: dated by the first", func() time.Duration { return c.take(a, at(10)).Sub(t0) }, 0, false},
		{"a again within the debounce: waits", func() time.Duration { return c.mark(a, at(30), delay) }, 30 * time.Millisecond, false},
		{"b meanwhile: at once", func() time.Duration { return c.mark(b, at(31), delay) }, 0, true},
		{"b's sync", func() time.Duration { return c.take(b, at(32)).Sub(t0) }, 31 * time.Millisecond, false},
		{"a's sync", func() time.Duration { return c.take(a, at(60)).Sub(t0) }, 30 * time.Millisecond, false},
		{"a's sync with no change: dated now", func() time.Duration { return c.take(a, at(200)).Sub(t0) }, 200 * time.Millisecond, false},
	} {
		got := step.do()
		if step.wantSync && got > 0 || !step.wantSync && got != step.want {
			t.Errorf("%s: got %s, want %s (at once: %v)", step.name, got, step.want, step.wantSync)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkShardTexts: what a sync computes at 5,000 nodes before it writes:
// the records of every node and the text of each of the 512 shards.
func BenchmarkShardTexts(b *testing.B) {
	nodes := make([]corev1.Node, 5000)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("edge-node-%06d", i), i%10 != 0, internal(fmt.Sprintf("10.1.%d.%d", i>>8, i&255)))
	}
	rules := tunnelnodes.YurtTunnelRules(netip.MustParseAddr("10.96.0.9"))
	store := storeOf(b, nodes)
	for b.Loop() {
		entries, _, _ := desiredRecords(store.All(), store.Len(), rules)
		count := tunnelnodes.ShardCount(len(entries), 0)
		groups := make([][]tunnelnodes.HostEntry, count)
		for _, e := range entries {
			i := tunnelnodes.ShardOf(e.Name, count)
			groups[i] = append(groups[i], e)
		}
		for _, g := range groups {
			tunnelnodes.RenderHosts(g)
		}
	}
}
