package yurthosts

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// reconnectBackoff replaces client-go's default reflector backoff, which
// grows to 30–60 s during a long apiserver outage: a DNS server must see
// the first change made after the apiserver is back within a second. Retries
// come every 0.5–0.75 s: while the apiserver is down each is one refused
// connection; once it is back, one list of a single object.
// Throttling (429 with Retry-After) is waited out inside client-go's REST
// client before the reflector sees an error.
var reconnectBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 4, Cap: 500 * time.Millisecond}

// listWatcher is the List and Watch of a typed client, such as
// CoreV1().ConfigMaps(namespace): client-go's fake clientset implements
// these (its RESTClient() is nil).
type listWatcher[L k8sruntime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// objectStore is a store kept by a reflector for the one object named name,
// field-selected on the server, or for the objects a label selects; every
// change, including a relist after reconnecting, calls onChange.
type objectStore[T k8sruntime.Object] struct {
	cache.Store
	reflector *cache.Reflector
	key       string // of the one object; empty for a label-selected store
	listed    atomic.Bool
	onChange  func()
}

// listThenWatch is a ListWatch that reports watch-list (a watch with
// sendInitialEvents=true standing in for the LIST) unsupported, so the
// reflector always LISTs then WATCHes, whatever the WatchListClient gate
// says. yurthub, serving from its cache while the cloud is away, answers a
// watch-list with 200 and then nothing: no initial events, no bookmark, so
// a reflector that starts with one never syncs (client-go falls back to
// LIST only on an error). Its cached LIST answers at once. For one object
// the streaming list saves nothing.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

func newObjectStore[T, L k8sruntime.Object](api listWatcher[L], expected T, namespace, name string, onChange func()) *objectStore[T] {
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	s := newSelectedStore(api, expected, namespace+"/"+name, func(opts *metav1.ListOptions) { opts.FieldSelector = byName }, onChange)
	s.key = namespace + "/" + name
	return s
}

// newShardStore keeps the shards of records in namespace: one
// label-selected list and watch for all of them.
func newShardStore(api listWatcher[*corev1.ConfigMapList], namespace, records string, onChange func()) *objectStore[*corev1.ConfigMap] {
	byLabel := labels.SelectorFromSet(labels.Set{tunnelnodes.RecordsOfLabel: records}).String()
	return newSelectedStore(api, &corev1.ConfigMap{}, namespace+"/"+byLabel,
		func(opts *metav1.ListOptions) { opts.LabelSelector = byLabel }, onChange)
}

// newSelectedStore is a store kept by a reflector whose lists and watches
// select applies to; name names it in logs.
func newSelectedStore[T, L k8sruntime.Object](api listWatcher[L], expected T, name string, selectObjects func(*metav1.ListOptions), onChange func()) *objectStore[T] {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (k8sruntime.Object, error) {
			selectObjects(&opts)
			return api.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			selectObjects(&opts)
			return api.Watch(ctx, opts)
		},
	}
	s := &objectStore[T]{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), onChange: onChange}
	backoff := reconnectBackoff
	s.reflector = cache.NewReflectorWithOptions(listThenWatch{lw}, expected, s,
		cache.ReflectorOptions{Name: name, Backoff: &backoff})
	return s
}

func (s *objectStore[T]) Add(obj any) error    { return s.changed(s.Store.Add(obj)) }
func (s *objectStore[T]) Update(obj any) error { return s.changed(s.Store.Update(obj)) }
func (s *objectStore[T]) Delete(obj any) error { return s.changed(s.Store.Delete(obj)) }

func (s *objectStore[T]) Replace(list []any, resourceVersion string) error {
	err := s.Store.Replace(list, resourceVersion)
	s.listed.Store(true)
	return s.changed(err)
}

func (s *objectStore[T]) changed(err error) error {
	s.onChange()
	return err
}

// hasListed reports whether the first list is in (true for no store).
func (s *objectStore[T]) hasListed() bool { return s == nil || s.listed.Load() }

// object is the stored object; the zero T (nil) when it is absent or there
// is no store.
func (s *objectStore[T]) object() T {
	var none T
	if s == nil {
		return none
	}
	obj, ok, _ := s.GetByKey(s.key)
	if !ok {
		return none
	}
	return obj.(T)
}

// objects are the stored objects (none for no store).
func (s *objectStore[T]) objects() []T {
	if s == nil {
		return nil
	}
	list := s.List()
	out := make([]T, len(list))
	for i, obj := range list {
		out[i] = obj.(T)
	}
	return out
}
