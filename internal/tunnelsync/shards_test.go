package tunnelsync

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
