package tunnelsync

import (
	"context"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ControllerName names the controller in metrics and logs, and its events.
const ControllerName = "tunnel-nodes-sync"

// NewReconciler is the sync of cfg, reading from mgr's cache and writing
// through its client.
func NewReconciler(mgr manager.Manager, cfg Config) *Reconciler {
	r := &Reconciler{
		cfg:       cfg,
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder(ControllerName),
	}
	r.nodes = newNodeStore(cfg.EdgeNodeSelector, r.nodeChanged)
	return r
}

// SetupWithManager wires the controller: a change of a node's labels or
// addresses enqueues its shard's key and the single ConfigMap's; a change
// of the tunnel Service, of the records ConfigMap or a shard (not the
// sync's own write), of the server config or of Raven's config enqueues
// the full sync. Each key is debounced. Shards are synced in parallel.
// The controller runs on every replica; it syncs only while lead leads,
// and each term starts afresh with a full sync.
func (r *Reconciler) SetupWithManager(mgr manager.Manager, lead *leadership) error {
	nodes, err := newNodeInformer(mgr.GetConfig(), r.nodes)
	if err != nil {
		return err
	}
	if err := mgr.Add(nodes); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: shardWriters}).
		WatchesRawSource(r.nodes).
		WatchesRawSource(lead.queueAtStart(syncRequest)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Service{}, debounced[*corev1.Service](r), notOwnWrite[*corev1.Service](&r.own))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.ConfigMap{}, debounced[*corev1.ConfigMap](r), notOwnWrite[*corev1.ConfigMap](&r.own)))
	for _, c := range []struct {
		name   string
		reader *client.Reader
	}{{r.cfg.ServerConfig, &r.serverConfig}, {r.cfg.RulesConfig, &r.rulesConfig}} {
		if c.name == "" {
			continue
		}
		named, err := namedCache(mgr, r.cfg.Namespace, &corev1.ConfigMap{}, c.name)
		if err != nil {
			return err
		}
		*c.reader = named
		b = b.WatchesRawSource(source.Kind(named, &corev1.ConfigMap{}, debounced[*corev1.ConfigMap](r)))
	}
	lead.atStart(r.startTerm)
	return b.Complete(lead.gate(r))
}

// nodeChanged enqueues what a change of node name (""; any node) rewrites:
// its shard of the set last written, and the single ConfigMap; the full
// sync while no set is written (or shards are off), or on a list.
func (r *Reconciler) nodeChanged(q workqueue.TypedRateLimitingInterface[reconcile.Request], name string) {
	count := r.shards.count()
	if name == "" || count == 0 {
		r.enqueue(q, syncRequest)
		return
	}
	r.enqueue(q, r.shardRequest(tunnelnodes.ShardOf(name, count), count))
	if !r.cfg.SkipSingleConfigMap {
		r.enqueue(q, r.singleRequest())
	}
}

// enqueue adds req at once when its last sync started more than the
// debounce ago (a lone change is written without waiting), else when the
// debounce has passed since, so changes in a burst are written together,
// at most one sync of a key per debounce (as kube-proxy's
// min-sync-period). The queue keeps the earliest time for a waiting key.
func (r *Reconciler) enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request) {
	if wait := r.trigger.mark(req, time.Now(), r.cfg.Debounce); wait > 0 {
		q.AddAfter(req, wait)
		return
	}
	q.Add(req)
}

// notOwnWrite drops the watch event that echoes the sync's own write (see
// ownWrites); a deletion always passes.
func notOwnWrite[T client.Object](own *ownWrites) predicate.TypedPredicate[T] {
	return predicate.TypedFuncs[T]{
		CreateFunc: func(e event.TypedCreateEvent[T]) bool { return !own.isOwn(e.Object) },
		UpdateFunc: func(e event.TypedUpdateEvent[T]) bool { return !own.isOwn(e.ObjectNew) },
	}
}

// debounced enqueues the full sync on every event, debounced (enqueue).
func debounced[T client.Object](r *Reconciler) handler.TypedFuncs[T, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) { r.enqueue(q, syncRequest) }
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		UpdateFunc: func(_ context.Context, _ event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		GenericFunc: func(_ context.Context, _ event.TypedGenericEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
	}
}
