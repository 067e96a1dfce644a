package tunnelsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// syncRequest recomputes everything: at start, on a (re)list of the nodes,
// on a change of the tunnel Service, the records ConfigMap or a config. A
// node's change has the key of its shard (shardRequest) and of the single
// records ConfigMap (singleRequest) instead: its cost does not grow with
// the fleet.
var syncRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "tunnel-nodes"}}

// Reconciler computes the desired state from the caches, diffs it with what
// is stored, and writes only the difference, with optimistic concurrency.
type Reconciler struct {
	cfg Config
	// nodes are what the records need of every Node.
	nodes *nodeStore
	// client reads from the manager's cache (the Service, the records
	// ConfigMap and shards) and writes to the API.
	client client.Client
	// apiReader reads the API directly, after a conflict showed the cache lags.
	apiReader client.Reader
	// serverConfig reads the tunnel server config; nil when port sync is off.
	serverConfig client.Reader
	// rulesConfig reads the ConfigMap the layout's rules read; nil when
	// they read none.
	rulesConfig client.Reader
	recorder    events.EventRecorder

	// all is held exclusively by a full sync and shared by the sync of one
	// shard or of the single ConfigMap (the queue never runs a key twice at
	// once): a full sync's texts, computed before a shard's sync wrote a
	// newer one, must not be written after it.
	all     gosync.RWMutex
	trigger triggerClock
	// own are the sync's latest writes: their watch events are no change.
	own ownWrites
	// shards is what the last writes left in the shard set.
	shards shardTally
	// singleTooLarge: the records were over the single ConfigMap's limit
	// at the last sync (said once, on the change).
	singleTooLarge bool
	// shardsNamespaceMissing: the last shard write found no namespace
	// (said once, on the change).
	shardsNamespaceMissing atomic.Bool
	// lastPortReport avoids repeating the same bad-entry report on every sync.
	lastPortReport string
}

// triggerClock remembers, for each key, when the first change since its
// last sync arrived (the records carry it so yurthosts can measure
// end-to-end latency) and when its last sync started (the debounce counts
// from it).
type triggerClock struct {
	mu       gosync.Mutex
	first    map[reconcile.Request]time.Time
	lastSync map[reconcile.Request]time.Time
}

// mark notes a change for req at now, and returns how long it waits so
// that req's syncs start at least delay apart; zero or less: sync now.
func (c *triggerClock) mark(req reconcile.Request, now time.Time, delay time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first == nil {
		c.first = map[reconcile.Request]time.Time{}
	}
	if _, ok := c.first[req]; !ok {
		c.first[req] = now
	}
	return delay - now.Sub(c.lastSync[req])
}

// reset forgets every change and sync.
func (c *triggerClock) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.first, c.lastSync = nil, nil
}

// take starts a sync of req at now: the trigger time of its changes.
func (c *triggerClock) take(req reconcile.Request, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastSync == nil {
		c.lastSync = map[reconcile.Request]time.Time{}
	}
	c.lastSync[req] = now
	t, ok := c.first[req]
	delete(c.first, req)
	if !ok {
		t = now
	}
	return t
}

// ownWrites remembers the resourceVersion of the sync's latest write of each
// object it writes. The watch event echoing that write changes no input of
// the records; let through, it would start the trigger clock early and date
// the next real change before it happened.
type ownWrites struct {
	// inflight is held shared by each write call (shards are written in
	// parallel) and exclusively by isOwn, so that an echo's check cannot run
	// before the resourceVersion of its write is known.
	inflight gosync.RWMutex
	mu       gosync.Mutex
	rvs      map[types.NamespacedName]string
}

// write runs one write call and remembers the resourceVersion it left.
func (w *ownWrites) write(obj client.Object, call func() error) error {
	w.inflight.RLock()
	defer w.inflight.RUnlock()
	err := call()
	if err == nil {
		w.mu.Lock()
		if w.rvs == nil {
			w.rvs = map[types.NamespacedName]string{}
		}
		w.rvs[client.ObjectKeyFromObject(obj)] = obj.GetResourceVersion()
		w.mu.Unlock()
	}
	return err
}

// reset forgets every write.
func (w *ownWrites) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rvs = nil
}

// forget drops a deleted object.
func (w *ownWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rvs, key)
}

// isOwn: obj is as the sync's latest write of it left it.
func (w *ownWrites) isOwn(obj client.Object) bool {
	w.inflight.Lock()
	w.inflight.Unlock() //nolint:staticcheck // only waits for the writes in flight
	w.mu.Lock()
	defer w.mu.Unlock()
	rv, ok := w.rvs[client.ObjectKeyFromObject(obj)]
	return ok && rv == obj.GetResourceVersion()
}

// startTerm forgets what the sync knew of its writes at the start of a
// leadership term (run by leadership.begin, no sync running): another
// replica may have written meanwhile. The term's full sync learns it
// again; a change seen while not leading is dated from the term's start.
func (r *Reconciler) startTerm() {
	r.trigger.reset()
	r.own.reset()
	r.shards.reset(nil, nil)
	r.singleTooLarge = false
	r.shardsNamespaceMissing.Store(false)
	r.lastPortReport = ""
}

// Reconcile implements reconcile.Reconciler: syncRequest syncs everything,
// a shard's key that shard, the single ConfigMap's key that ConfigMap.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	start := time.Now()
	defer func() { syncDuration.Observe(time.Since(start).Seconds()) }()
	triggered := r.trigger.take(req, start)
	switch index, count, ok := r.shardOf(req); {
	case ok:
		if result, done, err := r.syncShard(ctx, index, count, triggered); done {
			return result, err
		}
		// The set is to change: only a full sync writes a new one.
	case req == r.singleRequest():
		return r.syncSingle(ctx, triggered)
	}
	return r.syncAll(ctx, triggered)
}

// syncAll computes every record and brings the shards, the single
// ConfigMap and the Service's ports to what they say.
func (r *Reconciler) syncAll(ctx context.Context, triggered time.Time) (reconcile.Result, error) {
	r.all.Lock()
	defer r.all.Unlock()
	rules, annotations, ok, err := r.inputs(ctx, triggered)
	if !ok || err != nil {
		return reconcile.Result{}, err
	}
	// By bucket: a shard of any set is a union of buckets.
	buckets := make([]bucketRecords, tunnelnodes.MaxShards)
	var counts recordCounts
	var skipped []skippedNode
	for b := range buckets {
		e, c, s := desiredRecords(r.nodes.Shard(b, tunnelnodes.MaxShards), 0, rules)
		buckets[b] = bucketRecords{e, c}
		counts = counts.plus(c)
		skipped = append(skipped, s...)
	}
	setRecordsGauges(counts)
	sortSkipped(skipped)
	logSkipped(ctx, skipped)

	// The shards first: every coredns-yurt reads them; the single ConfigMap
	// is for other readers. Neither failing keeps the other from its write.
	var result reconcile.Result
	var shardsErr, singleErr error
	if r.cfg.ShardsNamespace != "" {
		result, shardsErr = r.syncShards(ctx, buckets, counts, annotations, triggered)
	}
	if !r.cfg.SkipSingleConfigMap {
		entries := make([]tunnelnodes.HostEntry, 0, counts.Edge+counts.Cloud)
		for _, b := range buckets {
			entries = append(entries, b.entries...)
		}
		singleErr = r.syncRecords(ctx, entries, annotations, counts, triggered)
	}
	if err := errors.Join(shardsErr, singleErr); err != nil {
		return reconcile.Result{}, err
	}
	if r.serverConfig != nil {
		if err := r.syncPorts(ctx); err != nil {
			return reconcile.Result{}, err
		}
	}
	lastSuccessTimestamp.SetToCurrentTime()
	return result, nil
}

// singleRequest is the key of the single records ConfigMap's sync.
func (r *Reconciler) singleRequest() reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.cfg.Namespace, Name: r.cfg.ConfigMap}}
}

// syncSingle writes the single records ConfigMap after a node's change.
func (r *Reconciler) syncSingle(ctx context.Context, triggered time.Time) (reconcile.Result, error) {
	r.all.RLock()
	defer r.all.RUnlock()
	if r.singleTooLarge && r.shards.bytes() > tunnelnodes.MaxHostsBytes {
		return reconcile.Result{}, nil // still too large, and said so: no pass over the fleet
	}
	rules, annotations, ok, err := r.inputs(ctx, triggered)
	if !ok || err != nil {
		return reconcile.Result{}, err
	}
	entries, counts, _ := desiredRecords(r.nodes.All(), r.nodes.Len(), rules)
	return reconcile.Result{}, r.syncRecords(ctx, entries, annotations, counts, triggered)
}

// inputs are the rules for the nodes and the annotations of a write
// triggered then; ok is false when nothing must be written.
func (r *Reconciler) inputs(ctx context.Context, triggered time.Time) (rules tunnelnodes.Rules, annotations map[string]string, ok bool, err error) {
	svc := &corev1.Service{}
	switch err := r.client.Get(ctx, types.NamespacedName{Namespace: r.cfg.Namespace, Name: r.cfg.Service}, svc); {
	case apierrors.IsNotFound(err):
		svc = nil
	case err != nil:
		errorsTotal.WithLabelValues(reasonAPI).Inc()
		return nil, nil, false, fmt.Errorf("reading tunnel service: %w", err)
	}
	rules, clusterIPs, ok, err := r.rules(ctx, svc)
	if !ok || err != nil {
		return nil, nil, false, err
	}
	return rules, map[string]string{
		tunnelnodes.LastChangeTriggerTimeAnnotation: triggered.UTC().Format(time.RFC3339Nano),
		tunnelnodes.TunnelClusterIPsAnnotation:      clusterIPs,
	}, true, nil
}

// rules are the layout's rules for the cluster as it is now, and the
// ClusterIPs the records are rendered for: the text carries them (an
// annotation) so that every yurthosts replica remaps the same entries after
// a Service recreation. ok is false when nothing must be written.
func (r *Reconciler) rules(ctx context.Context, svc *corev1.Service) (rules tunnelnodes.Rules, clusterIPs string, ok bool, err error) {
	var config map[string]string
	if r.rulesConfig != nil {
		cfgKey := types.NamespacedName{Namespace: r.cfg.Namespace, Name: r.cfg.RulesConfig}
		cfg := &corev1.ConfigMap{}
		if err := r.rulesConfig.Get(ctx, cfgKey, cfg); client.IgnoreNotFound(err) != nil {
			errorsTotal.WithLabelValues(reasonAPI).Inc()
			return nil, "", false, fmt.Errorf("reading the rules' config %s: %w", cfgKey, err)
		}
		config = cfg.Data
	}
	rules, toTunnel := r.cfg.Layout.Rules(config, tunnelnodes.TunnelClusterIP(svc))
	switch {
	case toTunnel:
		return rules, tunnelnodes.FormatClusterIPs(tunnelnodes.ServiceClusterIPs(svc)), true, nil
	case r.cfg.Layout.NeedsTunnel:
		// Writing now would drop every edge node; yurthosts keeps answering
		// the stored records (and follows a recreated Service by itself).
		errorsTotal.WithLabelValues(reasonNoTunnelIP).Inc()
		log.FromContext(ctx).Info("Tunnel service missing or without a ClusterIP; keeping the stored records",
			"service", r.cfg.Namespace+"/"+r.cfg.Service)
		return nil, "", false, nil
	}
	return rules, "", true, nil
}

// syncRecords writes the entries' text and the annotations into the single
// records ConfigMap when the text or the ClusterIPs differ, keeping every
// other key, label and annotation. A text over the ConfigMap limit is not
// written, nor rendered (the stored one stays): that is said once, when it
// stops fitting.
func (r *Reconciler) syncRecords(ctx context.Context, entries []tunnelnodes.HostEntry, annotations map[string]string, counts recordCounts, triggered time.Time) error {
	logger := log.FromContext(ctx)
	key := types.NamespacedName{Namespace: r.cfg.Namespace, Name: r.cfg.ConfigMap}
	size := tunnelnodes.RenderedSize(entries)
	fits := size <= tunnelnodes.MaxHostsBytes
	if fits {
		singleConfigMapFits.Set(1)
	} else {
		singleConfigMapFits.Set(0)
		errorsTotal.WithLabelValues(reasonTooLarge).Inc()
	}
	if fits == r.singleTooLarge { // it changed: say so once
		r.reportSingleFits(ctx, key, fits, size, counts)
	}
	r.singleTooLarge = !fits
	if !fits {
		return nil
	}
	text := tunnelnodes.RenderHosts(entries)
	clusterIPs := annotations[tunnelnodes.TunnelClusterIPsAnnotation]
	done, err := writeConflictSafe(ctx, r, objectConfigMap, key, func(cm *corev1.ConfigMap, found bool) write {
		if !found {
			cm.ObjectMeta = metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Annotations: maps.Clone(annotations)}
			cm.Data = map[string]string{r.cfg.ConfigMapKey: text}
			return create
		}
		if stored, ok := cm.Data[r.cfg.ConfigMapKey]; ok && stored == text &&
			cm.Annotations[tunnelnodes.TunnelClusterIPsAnnotation] == clusterIPs {
			return noWrite
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[r.cfg.ConfigMapKey] = text
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		maps.Copy(cm.Annotations, annotations)
		return update
	})
	if err != nil {
		errorsTotal.WithLabelValues(reasonAPI).Inc()
		return fmt.Errorf("writing records ConfigMap %s: %w", key, err)
	}
	switch done {
	case create:
		logger.Info("Created records ConfigMap", "configmap", key.String(), "edge", counts.Edge, "cloud", counts.Cloud)
	case update:
		logger.V(1).Info("Wrote records", "configmap", key.String(), "edge", counts.Edge, "cloud", counts.Cloud,
			"skipped", counts.Skipped, "sinceTrigger", time.Since(triggered))
	}
	return nil
}

// reportSingleFits logs, and records as an event on the ConfigMap, that the
// records stopped (or started again) fitting in the single ConfigMap.
func (r *Reconciler) reportSingleFits(ctx context.Context, key types.NamespacedName, fits bool, size int, counts recordCounts) {
	logger := log.FromContext(ctx)
	cm := &corev1.ConfigMap{}
	found := r.client.Get(ctx, key, cm) == nil
	if fits {
		logger.Info("Records fit in the single ConfigMap again; writing it", "configmap", key.String(), "bytes", size)
		return
	}
	msg := fmt.Sprintf("records for %d nodes are %d bytes, over the %d byte ConfigMap limit: not written, the stored records stay",
		counts.Edge+counts.Cloud, size, tunnelnodes.MaxHostsBytes)
	if r.cfg.ShardsNamespace != "" {
		msg += "; the shards in namespace " + r.cfg.ShardsNamespace + " hold every record"
	}
	logger.Error(errors.New(msg), "Records too large for the single ConfigMap", "configmap", key.String())
	if found {
		r.recorder.Eventf(cm, nil, corev1.EventTypeWarning, "RecordsTooLarge", "Sync", msg)
	}
}

// syncPorts makes the tunnel Service's dnat-* ports match the server config.
func (r *Reconciler) syncPorts(ctx context.Context) error {
	cfgKey := types.NamespacedName{Namespace: r.cfg.Namespace, Name: r.cfg.ServerConfig}
	serverCfg := &corev1.ConfigMap{}
	switch err := r.serverConfig.Get(ctx, cfgKey, serverCfg); {
	case apierrors.IsNotFound(err):
		serverCfg = nil // no extra ports: stale dnat-* ports go
	case err != nil:
		errorsTotal.WithLabelValues(reasonAPI).Inc()
		return fmt.Errorf("reading server config %s: %w", cfgKey, err)
	}
	var data map[string]string
	if serverCfg != nil {
		data = serverCfg.Data
	}
	mappings, bad := tunnelnodes.ParsePortMappings(data, r.cfg.HTTPSTargetPort, r.cfg.HTTPTargetPort)

	svcKey := types.NamespacedName{Namespace: r.cfg.Namespace, Name: r.cfg.Service}
	var conflicts []tunnelnodes.PortMapping
	done, err := writeConflictSafe(ctx, r, objectService, svcKey, func(svc *corev1.Service, found bool) write {
		if !found {
			return noWrite // nothing to put the ports on
		}
		var ports []corev1.ServicePort
		ports, conflicts = desiredServicePorts(svc.Spec.Ports, mappings)
		if portsEqual(svc.Spec.Ports, ports) {
			return noWrite
		}
		svc.Spec.Ports = ports
		return update
	})
	if err == nil && done == update {
		log.FromContext(ctx).Info("Updated tunnel service ports", "service", svcKey.String(), "dnatPorts", len(mappings)-len(conflicts))
	}
	r.reportBadPorts(ctx, serverCfg, bad, conflicts)
	if err != nil {
		errorsTotal.WithLabelValues(reasonAPI).Inc()
		return fmt.Errorf("updating tunnel service %s ports: %w", svcKey, err)
	}
	return nil
}

// reportBadPorts logs, counts and records an event once per distinct set of
// problems: the good entries have been applied regardless.
func (r *Reconciler) reportBadPorts(ctx context.Context, serverCfg *corev1.ConfigMap, bad []tunnelnodes.PortError, conflicts []tunnelnodes.PortMapping) {
	var problems []string
	for _, b := range bad {
		problems = append(problems, b.Error())
	}
	for _, c := range conflicts {
		problems = append(problems, fmt.Sprintf("port %d is already used by another port of the tunnel service", c.Port))
	}
	report := strings.Join(problems, "; ")
	if report == r.lastPortReport {
		return
	}
	r.lastPortReport = report
	if len(problems) == 0 {
		return
	}
	badPortEntriesTotal.Add(float64(len(problems)))
	log.FromContext(ctx).Info("Skipped bad port entries in the tunnel server config", "configmap", r.cfg.Namespace+"/"+r.cfg.ServerConfig, "problems", report)
	if serverCfg != nil {
		r.recorder.Eventf(serverCfg, nil, corev1.EventTypeWarning, "InvalidPortEntry", "Sync", "skipped: %s", report)
	}
}
