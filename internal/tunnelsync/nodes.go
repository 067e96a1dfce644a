package tunnelsync

import (
	"context"
	"fmt"
	"iter"
	"slices"
	gosync "sync"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The Nodes are the sync's one input that grows with the fleet, so they do
// not go through controller-runtime's cache (which keeps a Node object per
// node, and whose reflector decodes the whole first list before keeping
// anything). A client-go reflector lists them a page at a time, reading only
// what the records need of each (tunnelnodes.DecodeNodeList), keeps only
// tunnelnodes.Node of each (nodeStore), and tells the controller when a
// record input changed; watch events are single Nodes, decoded whole.

// nodeListPageSize is the Nodes of one list page: 500 kubelet-sized Nodes
// are about 5 MB of protobuf, read and dropped before the next page.
const nodeListPageSize = 500

// nodeStore keeps tunnelnodes.Node of every Node, by name: the reflector's
// store. A change of what the records are made of tells the controller
// which node changed; a kubelet's status update is decoded, compared and
// dropped.
type nodeStore struct {
	edge labels.Selector

	mu gosync.RWMutex
	// buckets hold the nodes by tunnelnodes.ShardOf(name, MaxShards): shard i
	// of a set of count (a power of two up to MaxShards) is buckets i,
	// i+count, i+2·count…, so one shard's nodes are read without a pass
	// over the fleet.
	buckets [tunnelnodes.MaxShards]map[string]tunnelnodes.Node
	len     int
	synced  bool
	// queue is the controller's, once it started; a change before that is
	// remembered in pending.
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	pending bool
	// changed tells the controller of a change of node name; "" is a
	// (re)list, which may have changed any.
	changed func(q workqueue.TypedRateLimitingInterface[reconcile.Request], name string)
}

func newNodeStore(edge labels.Selector, changed func(workqueue.TypedRateLimitingInterface[reconcile.Request], string)) *nodeStore {
	return &nodeStore{edge: edge, changed: changed}
}

// bucketOf is the index of name's bucket.
func bucketOf(name string) int { return tunnelnodes.ShardOf(name, tunnelnodes.MaxShards) }

// node is what the records need of obj: a watched *corev1.Node or a
// listed *listedNode.
func (s *nodeStore) node(obj any) (tunnelnodes.Node, error) {
	switch o := obj.(type) {
	case *corev1.Node:
		return tunnelnodes.NodeOf(o, s.edge), nil
	case *listedNode:
		return o.Node, nil
	}
	return tunnelnodes.Node{}, fmt.Errorf("node store: unexpected %T", obj)
}

// Add implements cache.ReflectorStore.
func (s *nodeStore) Add(obj any) error { return s.Update(obj) }

// Update implements cache.ReflectorStore: only a change of the record's
// inputs (not a kubelet's status update) reaches the controller.
func (s *nodeStore) Update(obj any) error {
	n, err := s.node(obj)
	if err != nil {
		return err
	}
	b := bucketOf(n.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	old, found := s.buckets[b][n.Name]
	if found && old.Equal(&n) {
		return nil
	}
	if s.buckets[b] == nil {
		s.buckets[b] = map[string]tunnelnodes.Node{}
	}
	s.buckets[b][n.Name] = n
	if !found {
		s.len++
	}
	s.changedLocked(n.Name)
	return nil
}

// Delete implements cache.ReflectorStore.
func (s *nodeStore) Delete(obj any) error {
	n, err := s.node(obj)
	if err != nil {
		return err
	}
	b := bucketOf(n.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, found := s.buckets[b][n.Name]; found {
		delete(s.buckets[b], n.Name)
		s.len--
	}
	s.changedLocked(n.Name)
	return nil
}

// Replace implements cache.ReflectorStore: a (re)list.
func (s *nodeStore) Replace(list []any, _ string) error {
	var buckets [tunnelnodes.MaxShards]map[string]tunnelnodes.Node
	for _, obj := range list {
		n, err := s.node(obj)
		if err != nil {
			return err
		}
		b := bucketOf(n.Name)
		if buckets[b] == nil {
			buckets[b] = map[string]tunnelnodes.Node{}
		}
		buckets[b][n.Name] = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buckets = buckets
	s.len = 0
	for _, b := range buckets {
		s.len += len(b)
	}
	s.synced = true
	s.changedLocked("")
	return nil
}

// Resync implements cache.ReflectorStore: nothing to resync.
func (s *nodeStore) Resync() error { return nil }

func (s *nodeStore) changedLocked(name string) {
	if s.queue == nil {
		s.pending = true
		return
	}
	s.changed(s.queue, name)
}

// Start implements source.SyncingSource: the store hands the controller's
// queue its changes, a change seen before now at once (as a list: the
// controller may not know where a node goes yet).
func (s *nodeStore) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = q
	if s.pending {
		s.changed(q, "")
	}
	return nil
}

// WaitForSync implements source.SyncingSource: no sync runs before the
// first list is in (it would write records without the nodes).
func (s *nodeStore) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), s.HasSynced) {
		return fmt.Errorf("nodes not listed: %w", context.Cause(ctx))
	}
	return nil
}

func (s *nodeStore) String() string { return "nodes" }

// HasSynced: the first list is in.
func (s *nodeStore) HasSynced() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced
}

// All yields every node, under the store's read lock: the caller must not
// keep the loop waiting on anything else.
func (s *nodeStore) All() iter.Seq[*tunnelnodes.Node] { return s.Shard(0, 1) }

// Shard yields the nodes of shard index of a set of count (a power of two
// up to MaxShards), under the store's read lock, as All.
func (s *nodeStore) Shard(index, count int) iter.Seq[*tunnelnodes.Node] {
	return func(yield func(*tunnelnodes.Node) bool) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		for b := index; b < len(s.buckets); b += count {
			for _, n := range s.buckets[b] {
				if !yield(&n) {
					return
				}
			}
		}
	}
}

// Len is the number of nodes kept.
func (s *nodeStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.len
}

// nodeInformer runs the reflector of the node store on every replica, as
// the manager runs its caches: a new leader starts with the nodes listed.
type nodeInformer struct{ reflector *cache.Reflector }

func (i nodeInformer) Start(ctx context.Context) error {
	i.reflector.RunWithContext(ctx)
	return nil
}

func (nodeInformer) NeedLeaderElection() bool { return false }

// newNodeInformer lists and watches the Nodes into store, in protobuf.
func newNodeInformer(cfg *rest.Config, store *nodeStore) (nodeInformer, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nodeInformer{}, err
	}
	lw := &nodeListWatch{
		page: func(ctx context.Context, opts metav1.ListOptions) (tunnelnodes.NodeList, error) {
			var contentType string
			body, err := c.CoreV1().RESTClient().Get().Resource("nodes").VersionedParams(&opts, scheme.ParameterCodec).
				Do(ctx).ContentType(&contentType).Raw()
			if err != nil {
				return tunnelnodes.NodeList{}, err
			}
			if contentType != runtime.ContentTypeProtobuf {
				return tunnelnodes.NodeList{}, fmt.Errorf("listing nodes: answered in %q, not protobuf", contentType)
			}
			return tunnelnodes.DecodeNodeList(body, store.edge)
		},
		watch: c.CoreV1().Nodes().Watch,
	}
	backoff := reconnectBackoff // not client-go's, which grows to 30–60 s through an outage
	return nodeInformer{cache.NewReflectorWithOptions(lw, &corev1.Node{}, store,
		cache.ReflectorOptions{Name: "nodes", TypeDescription: "*v1.Node", Backoff: &backoff})}, nil
}

// nodeListWatch lists Nodes a page at a time, reading only what the records
// need of each (tunnelnodes.DecodeNodeList), so the first list of 100,000
// kubelet-sized Nodes never holds more than a page's bytes.
type nodeListWatch struct {
	page  func(context.Context, metav1.ListOptions) (tunnelnodes.NodeList, error)
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// ListWithContext implements cache.ListerWithContext. The pages are read
// at the latest resourceVersion (a consistent snapshot the apiserver serves
// from its watch cache), never older than the reflector asked for.
func (lw *nodeListWatch) ListWithContext(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	out := &listedNodes{}
	opts := metav1.ListOptions{Limit: nodeListPageSize}
	for {
		page, err := lw.page(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, n := range page.Items {
			out.Items = append(out.Items, listedNode{Node: n})
		}
		if out.ResourceVersion == "" {
			out.ResourceVersion = page.ResourceVersion
		}
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// WatchWithContext implements cache.WatcherWithContext.
func (lw *nodeListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return lw.watch(ctx, opts)
}

// List implements cache.Lister.
func (lw *nodeListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch implements cache.Watcher.
func (lw *nodeListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported: a streaming watch-list would hand the
// reflector whole Nodes to hold until its end; the paged list holds a page.
func (lw *nodeListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// listedNodes is a list of listedNode: what the reflector gets from a list.
type listedNodes struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []listedNode
}

// listedNode is a listed Node as the records need it.
type listedNode struct {
	tunnelnodes.Node
}

// DeepCopyObject implements runtime.Object.
func (l *listedNodes) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = make([]listedNode, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*listedNode)
	}
	return &c
}

// GetObjectKind implements runtime.Object.
func (n *listedNode) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (n *listedNode) DeepCopyObject() runtime.Object {
	c := *n
	c.Addresses = slices.Clone(n.Addresses)
	return &c
}
