package tunnelsync

import (
	"context"
	"time"

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
	r.nodes = newNodeStore(cfg.EdgeNodeSelector, debouncedAdd(cfg.Debounce, &r.trigger))
	return r
}

// SetupWithManager wires the controller: every change of a node's labels or
// addresses, of the tunnel Service, of the records ConfigMap, of the server
// config and of Raven's config enqueues the one sync key, debounced.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	nodes, err := newNodeInformer(mgr.GetConfig(), r.nodes)
	if err != nil {
		return err
	}
	if err := mgr.Add(nodes); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		WatchesRawSource(r.nodes).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Service{}, debounced[*corev1.Service](r.cfg.Debounce, &r.trigger), notOwnWrite[*corev1.Service](&r.own))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.ConfigMap{}, debounced[*corev1.ConfigMap](r.cfg.Debounce, &r.trigger), notOwnWrite[*corev1.ConfigMap](&r.own)))
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
		b = b.WatchesRawSource(source.Kind(named, &corev1.ConfigMap{}, debounced[*corev1.ConfigMap](r.cfg.Debounce, &r.trigger)))
	}
	return b.Complete(r)
}

// notOwnWrite drops the watch event that echoes the sync's own write (see
// ownWrites); a deletion always passes.
func notOwnWrite[T client.Object](own *ownWrites) predicate.TypedPredicate[T] {
	return predicate.TypedFuncs[T]{
		CreateFunc: func(e event.TypedCreateEvent[T]) bool { return !own.isOwn(e.Object) },
		UpdateFunc: func(e event.TypedUpdateEvent[T]) bool { return !own.isOwn(e.ObjectNew) },
	}
}

// debouncedAdd enqueues the single sync key as debounced says.
func debouncedAdd(delay time.Duration, trigger *triggerClock) func(workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	return func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		now := time.Now()
		trigger.mark(now)
		if wait := trigger.sinceLastSync(now, delay); wait > 0 {
			q.AddAfter(syncRequest, wait)
			return
		}
		q.Add(syncRequest)
	}
}

// debounced enqueues the single sync key: at once when no sync started
// within the last delay (a lone node change is written without waiting),
// else when delay has passed since the last one started, so changes in a
// burst are written together, at most one sync per delay (as kube-proxy's
// min-sync-period). The queue keeps the earliest time for a waiting key.
func debounced[T client.Object](delay time.Duration, trigger *triggerClock) handler.TypedFuncs[T, reconcile.Request] {
	add := debouncedAdd(delay, trigger)
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
