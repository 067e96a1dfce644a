package yurthosts

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// watcher runs the reflectors of the records and of the tunnel Service
// (field-selected to its one object) and rebuilds the records whenever they
// change. The records are the single ConfigMap, field-selected to it; or,
// with a shards namespace, the union of the shard set that
// tunnelnodes.ServedShardSet picks, all shards in one label-selected watch.
// The single ConfigMap is then watched only while no shard set is complete
// (before the sync first writes one), so its whole text is not resent to
// every node on each change.
type watcher struct {
	src     source
	client  kubernetes.Interface
	publish func(*records)

	// configMaps watches the single ConfigMap; nil while it is not watched.
	configMaps     *objectStore[*corev1.ConfigMap]
	stopConfigMaps context.CancelFunc
	// shards is nil without a shards namespace.
	shards   *objectStore[*corev1.ConfigMap]
	services *objectStore[*corev1.Service]
	pending  chan struct{} // a rebuild is due
	ctx      context.Context
	cancel   context.CancelFunc
	running  sync.WaitGroup
	synced   atomic.Bool

	// Owned by the rebuild loop: the last single records text seen, the
	// last single ConfigMap whose text was within the size limit, the
	// shard count served (0: the single ConfigMap), and the last trigger
	// time observed.
	text         string
	accepted     *corev1.ConfigMap
	servedShards int
	lastTrigger  time.Time
	// Owned by the rebuild loop while shards are served (else nil): the
	// served set's shards as last parsed, by index, and the records built
	// of them for the Service's ClusterIPs clusterIPs.
	parsed     []parsedShard
	built      *records
	clusterIPs []netip.Addr
}

// parsedShard is a shard's text parsed, kept while the shard is the same
// object at the same resourceVersion: a change re-parses one shard, not
// all of them.
type parsedShard struct {
	uid             types.UID
	resourceVersion string
	entries         []tunnelnodes.HostEntry
	annotated       []netip.Addr
	trigger         time.Time
}

func newWatcher(src source, client kubernetes.Interface, publish func(*records)) *watcher {
	return &watcher{src: src, client: client, publish: publish}
}

// start launches the watches and the rebuild loop.
func (w *watcher) start() {
	// Export every series from the start, so a zero is visible as a zero.
	ref := w.src.configMapRef()
	parseErrors.WithLabelValues(ref).Add(0)
	entries.WithLabelValues(ref).Add(0)
	shardsServed.WithLabelValues(ref).Set(0)
	w.pending = make(chan struct{}, 1)
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if ns := w.src.shardsNamespace; ns != "" {
		w.shards = newShardStore(w.client.CoreV1().ConfigMaps(ns), ns, w.src.configMapName, w.notify)
		w.running.Go(func() { w.shards.reflector.RunWithContext(w.ctx) })
	} else {
		w.watchSingle(true)
	}
	if w.src.serviceName != "" {
		w.services = newObjectStore(w.client.CoreV1().Services(w.src.serviceNamespace), &corev1.Service{},
			w.src.serviceNamespace, w.src.serviceName, w.notify)
		w.running.Go(func() { w.services.reflector.RunWithContext(w.ctx) })
	}
	w.running.Go(w.loop)
}

// watchSingle starts or stops the watch of the single ConfigMap.
func (w *watcher) watchSingle(on bool) {
	switch {
	case on && w.configMaps == nil:
		w.configMaps = newObjectStore(w.client.CoreV1().ConfigMaps(w.src.configMapNamespace), &corev1.ConfigMap{},
			w.src.configMapNamespace, w.src.configMapName, w.notify)
		ctx, cancel := context.WithCancel(w.ctx)
		w.stopConfigMaps = cancel
		reflector := w.configMaps.reflector
		w.running.Go(func() { reflector.RunWithContext(ctx) })
	case !on && w.configMaps != nil:
		w.stopConfigMaps()
		w.configMaps, w.stopConfigMaps = nil, nil
		w.text, w.accepted = "", nil
	}
}

// waitForSync blocks until the first records are live or timeout passes;
// like the kubernetes plugin, the server then starts serving regardless.
func (w *watcher) waitForSync(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for !w.hasSynced() {
		if time.Now().After(deadline) {
			log.Warningf("%s not synced from the API after %s; serving without it until it is", w.src.configMapRef(), timeout)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the watches and the loop and waits for them, so a Corefile
// reload leaves no goroutine or watch behind.
func (w *watcher) stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.running.Wait()
	w.cancel = nil
}

func (w *watcher) hasSynced() bool { return w.synced.Load() }

// notify asks the loop for a rebuild; bursts coalesce into one.
func (w *watcher) notify() {
	select {
	case w.pending <- struct{}{}:
	default:
	}
}

func (w *watcher) loop() {
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-w.pending:
			w.rebuild()
		}
	}
}

// rebuild computes the records from the watches' current objects
// (level-triggered: it does not matter which event woke it) and publishes them.
func (w *watcher) rebuild() {
	ref := w.src.configMapRef()
	// Whether the stores have their first list (a missing object is known
	// to be missing only then), read before the objects: a list landing in
	// between then only makes this rebuild stale, never marks stale records
	// synced (its own notification rebuilds again).
	listed := w.services.hasListed() && w.shards.hasListed()
	var set tunnelnodes.ShardSet
	sharded := false
	if w.shards != nil {
		sets, _ := tunnelnodes.ShardSets(w.src.configMapName, w.shards.objects())
		set, sharded = tunnelnodes.ServedShardSet(sets)
		if !sharded && !listed {
			return // the shards may exist: not known before their list
		}
	}
	w.watchSingle(!sharded)
	if !sharded {
		singleListed := w.configMaps.hasListed()
		if w.shards != nil && !singleListed {
			return // keep the shards served until the single ConfigMap is in
		}
		listed = listed && singleListed
	}

	svc := w.services.object()
	var recs *records
	var trigger time.Time
	if sharded {
		recs, trigger = w.buildShards(set, svc)
	} else {
		cm := w.configMaps.object()
		if cm == nil && w.servedShards > 0 {
			return // a shard is gone for a moment and there is no single ConfigMap: keep the shards served
		}
		w.parsed, w.built, w.clusterIPs = nil, nil, nil
		recs = w.build(cm, svc)
		trigger = tunnelnodes.TriggerTime(cm)
	}
	// The gauges first: whoever sees the new answers scrapes them already.
	now := time.Now()
	entries.WithLabelValues(ref).Set(float64(recs.names))
	lastSyncTimestamp.WithLabelValues(ref).Set(float64(now.UnixNano()) / 1e9)
	if set.Count != w.servedShards {
		if sharded {
			log.Infof("%s: serving %d names from its %d shards in namespace %s", ref, recs.names, set.Count, w.src.shardsNamespace)
		} else {
			log.Infof("%s: no complete shard set in namespace %s; serving the ConfigMap's %d names", ref, w.src.shardsNamespace, recs.names)
		}
		w.servedShards = set.Count
		shardsServed.WithLabelValues(ref).Set(float64(set.Count))
	}
	w.publish(recs)
	wasSynced := w.synced.Load()
	if !wasSynced && listed {
		w.synced.Store(true)
		log.Infof("%s synced: %d names", ref, recs.names)
	}
	w.observeProgramming(trigger, now, wasSynced)
}

// observeProgramming records how long a change took from the cluster event
// to live answers. Triggers seen in the initial list are old news, not latency.
func (w *watcher) observeProgramming(trigger, now time.Time, wasSynced bool) {
	if trigger.IsZero() || trigger.Equal(w.lastTrigger) {
		return
	}
	w.lastTrigger = trigger
	if wasSynced {
		programmingDuration.WithLabelValues(w.src.configMapRef()).Observe(now.Sub(trigger).Seconds())
	}
}

// build computes the records from the single ConfigMap. A text over the
// size limit is rejected whole, with its annotation: the last accepted
// ConfigMap is served instead. Rejections and skipped lines are counted and
// logged once per content.
func (w *watcher) build(cm *corev1.ConfigMap, svc *corev1.Service) *records {
	ref := w.src.configMapRef()
	var text string
	if cm != nil {
		text = cm.Data[w.src.configMapKey]
	}
	fresh := text != w.text
	w.text = text
	oversized := len(text) > tunnelnodes.MaxHostsBytes
	if oversized {
		cm = w.accepted
	} else {
		w.accepted = cm
	}
	recs, skipped := buildRecords(cm, w.src.configMapKey, svc)
	switch {
	case !fresh:
		// Counted and logged when this text was first seen.
	case oversized:
		parseErrors.WithLabelValues(ref).Inc()
		log.Errorf("%s key %s is %d bytes, over the %d byte limit: ignored, keeping the previous %d names",
			ref, w.src.configMapKey, len(text), tunnelnodes.MaxHostsBytes, recs.names)
	default:
		w.reportSkipped(ref, skipped)
	}
	return recs
}

// buildShards computes the records from the union of set's shards, and
// the set's latest trigger time. A shard is re-parsed only when it changed
// since the last build, and only its table is rebuilt when the set and the
// Service's ClusterIPs are those of the last build: the records are then
// the last ones with its table replaced. Each shard is remapped by the
// ClusterIPs it names. Skipped lines are counted and logged once per shard
// content.
func (w *watcher) buildShards(set tunnelnodes.ShardSet, svc *corev1.Service) (*records, time.Time) {
	current := tunnelnodes.ServiceClusterIPs(svc)
	incremental := len(w.parsed) == set.Count && slices.Equal(current, w.clusterIPs)
	if len(w.parsed) != set.Count {
		w.parsed = make([]parsedShard, set.Count)
	}
	w.clusterIPs = current
	fresh := make(map[int]*table)
	var trigger time.Time
	for i, cm := range set.Shards {
		p := &w.parsed[i]
		same := p.uid == cm.UID && p.resourceVersion == cm.ResourceVersion
		if !same {
			var skipped []tunnelnodes.LineError
			*p = parsedShard{uid: cm.UID, resourceVersion: cm.ResourceVersion,
				annotated: tunnelnodes.ParseClusterIPs(cm.Annotations[tunnelnodes.TunnelClusterIPsAnnotation]),
				trigger:   tunnelnodes.TriggerTime(cm)}
			p.entries, skipped = tunnelnodes.ParseShardHosts(cm.Data[w.src.configMapKey], i, set.Count)
			w.reportSkipped(w.src.shardsNamespace+"/"+cm.Name, skipped)
		}
		if p.trigger.After(trigger) {
			trigger = p.trigger
		}
		if !same || !incremental {
			fresh[i] = newTable(recordGroup{p.entries, newTunnel(p.annotated, current)})
		}
	}
	if incremental {
		w.built = w.built.with(fresh)
		return w.built, trigger
	}
	tables := make([]*table, set.Count)
	for i, t := range fresh {
		tables[i] = t
	}
	w.built = newRecords(tables)
	return w.built, trigger
}

// reportSkipped counts and logs the lines or names of object's text that
// could not be used.
func (w *watcher) reportSkipped(object string, skipped []tunnelnodes.LineError) {
	if len(skipped) == 0 {
		return
	}
	parseErrors.WithLabelValues(w.src.configMapRef()).Add(float64(len(skipped)))
	const shown = 3
	var first []string
	for i := 0; i < len(skipped) && i < shown; i++ {
		first = append(first, skipped[i].Error())
	}
	log.Warningf("%s key %s: skipped %d malformed lines or names (%s)", object, w.src.configMapKey, len(skipped), strings.Join(first, "; "))
}
