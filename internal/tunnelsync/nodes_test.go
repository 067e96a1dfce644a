package tunnelsync

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestNodeStoreChanges: only what the records are made of reaches the
// controller, naming the node: a kubelet's status update does not, a label
// or address change, a new node and a deletion do; changes before the
// controller started are told when it does, as a list ("").
func TestNodeStoreChanges(t *testing.T) {
	selector, _ := labels.Parse(DefaultEdgeNodeSelector)
	var changed []string
	s := newNodeStore(selector, func(_ workqueue.TypedRateLimitingInterface[reconcile.Request], name string) {
		changed = append(changed, name)
	})
	edge := node("edge-1", true, internal("10.0.0.1"), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "edge-1"})
	if err := s.Replace([]any{&edge}, "1"); err != nil {
		t.Fatal(err)
	}
	if len(changed) != 0 || !s.HasSynced() {
		t.Fatalf("before the controller started: told %q, synced %v", changed, s.HasSynced())
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := s.Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(changed, []string{""}) {
		t.Fatalf("the list before the start: told %q, want one list", changed)
	}

	for _, step := range []struct {
		name   string
		change func(n *corev1.Node)
		want   bool
	}{
		{"kubelet status", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10.2"}, SizeBytes: 1 << 20}}
		}, false},
		{"another label", func(n *corev1.Node) { n.Labels["topology.kubernetes.io/zone"] = "z1" }, false},
		{"an annotation", func(n *corev1.Node) { n.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"} }, false},
		{"hostname address", func(n *corev1.Node) { n.Status.Addresses[1].Address = "edge-1.local" }, false},
		{"no longer edge", func(n *corev1.Node) { n.Labels[tunnelnodes.EdgeNodeLabel] = "false" }, true},
		{"InternalIP", func(n *corev1.Node) { n.Status.Addresses[0].Address = "10.0.0.2" }, true},
		{"ExternalIP added", func(n *corev1.Node) { n.Status.Addresses = append(n.Status.Addresses, external("203.0.113.1")) }, true},
		{"addresses reordered", func(n *corev1.Node) { slices.Reverse(n.Status.Addresses) }, true},
	} {
		changed = nil
		step.change(&edge)
		if err := s.Update(edge.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if want := map[bool][]string{true: {"edge-1"}}[step.want]; !slices.Equal(changed, want) {
			t.Errorf("%s: told %q, want %q", step.name, changed, want)
		}
	}
	var kept []tunnelnodes.Node
	for n := range s.All() {
		kept = append(kept, *n)
	}
	want := tunnelnodes.Node{Name: "edge-1", Addresses: []corev1.NodeAddress{external("203.0.113.1"), internal("10.0.0.2")}}
	if len(kept) != 1 || !kept[0].Equal(&want) {
		t.Errorf("kept %+v, want %+v", kept, want)
	}

	changed = nil
	second := node("cloud-1", false, internal("192.168.0.10"))
	if err := s.Add(&second); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(&edge); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(changed, []string{"cloud-1", "edge-1"}) || s.Len() != 1 {
		t.Errorf("add and delete: told %q, %d nodes kept; want cloud-1, edge-1 and 1", changed, s.Len())
	}
	if err := s.Add(&corev1.Pod{}); err == nil {
		t.Error("a Pod was taken for a Node")
	}
}

// TestNodeStoreShard: the nodes of a shard of any set are those ShardOf
// puts there, read from its buckets alone.
func TestNodeStoreShard(t *testing.T) {
	nodes := make([]corev1.Node, 3000)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("node-%04d", i), i%2 == 0, internal(fmt.Sprintf("10.0.%d.%d", i>>8, i&255)))
	}
	s := storeOf(t, nodes)
	for _, count := range []int{1, 2, 16, 512, tunnelnodes.MaxShards} {
		seen := 0
		for _, index := range []int{0, count / 2, count - 1} {
			var got, want []string
			for n := range s.Shard(index, count) {
				got = append(got, n.Name)
			}
			for _, n := range nodes {
				if tunnelnodes.ShardOf(n.Name, count) == index {
					want = append(want, n.Name)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("shard %d of %d: %d nodes, want %d", index, count, len(got), len(want))
			}
			seen += len(got)
		}
		if count == 1 && seen != 3*len(nodes) {
			t.Errorf("the one shard of 1 holds %d nodes, want all %d", seen/3, len(nodes))
		}
	}
}

// pagedNodes serves nodes a page at a time, as the apiserver does with
// limit and continue.
type pagedNodes struct {
	nodes []tunnelnodes.Node
	asked []metav1.ListOptions
}

func (p *pagedNodes) page(_ context.Context, opts metav1.ListOptions) (tunnelnodes.NodeList, error) {
	p.asked = append(p.asked, opts)
	start := 0
	if opts.Continue != "" {
		fmt.Sscan(opts.Continue, &start)
	}
	end := min(start+int(opts.Limit), len(p.nodes))
	list := tunnelnodes.NodeList{ResourceVersion: fmt.Sprint(100 + len(p.asked)), Items: p.nodes[start:end]}
	if end < len(p.nodes) {
		list.Continue = fmt.Sprint(end)
	}
	return list, nil
}

// TestNodeListPages: the list is read in pages of nodeListPageSize and gives
// the reflector every node at the first page's resourceVersion (the
// snapshot the continue tokens read).
func TestNodeListPages(t *testing.T) {
	nodes := make([]tunnelnodes.Node, 2*nodeListPageSize+1)
	for i := range nodes {
		nodes[i] = tunnelnodes.Node{Name: fmt.Sprintf("node-%04d", i), Edge: i%2 == 0, Addresses: []corev1.NodeAddress{internal(fmt.Sprintf("10.0.%d.%d", i>>8, i&255))}}
	}
	pages := &pagedNodes{nodes: nodes}
	obj, err := (&nodeListWatch{page: pages.page}).List(metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	list := obj.(*listedNodes)
	if len(pages.asked) != 3 || list.ResourceVersion != "101" {
		t.Errorf("%d pages read, resourceVersion %s; want 3 and the first page's, 101", len(pages.asked), list.ResourceVersion)
	}
	for _, opts := range pages.asked {
		if opts.Limit != nodeListPageSize || opts.ResourceVersion != "" {
			t.Errorf("page asked with %+v: want limit %d at the latest resourceVersion", opts, nodeListPageSize)
		}
	}
	if len(list.Items) != len(nodes) {
		t.Fatalf("%d nodes listed, want %d", len(list.Items), len(nodes))
	}
	for i, got := range list.Items {
		if !got.Equal(&nodes[i]) {
			t.Errorf("node %d: %+v, want %+v", i, got.Node, nodes[i])
		}
	}
}
