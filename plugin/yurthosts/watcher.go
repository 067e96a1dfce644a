package yurthosts

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// watcher runs one reflector for the records ConfigMap and one for the
// tunnel Service, each field-selected to its single object, and rebuilds
// the records whenever either changes.
type watcher struct {
	src     source
	client  kubernetes.Interface
	publish func(*records)

	configMaps *objectStore[*corev1.ConfigMap]
	services   *objectStore[*corev1.Service]
	pending    chan struct{} // a rebuild is due
	stopCh     chan struct{}
	running    sync.WaitGroup
	synced     atomic.Bool

	// Owned by the rebuild loop: the last records text seen, the last
	// ConfigMap whose text was within the size limit, and the last trigger
	// time observed.
	text        string
	accepted    *corev1.ConfigMap
	lastTrigger string
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
	w.pending = make(chan struct{}, 1)
	w.stopCh = make(chan struct{})
	w.configMaps = newObjectStore(w.client.CoreV1().ConfigMaps(w.src.configMapNamespace), &corev1.ConfigMap{},
		w.src.configMapNamespace, w.src.configMapName, w.notify)
	w.running.Go(func() { w.configMaps.reflector.Run(w.stopCh) })
	if w.src.serviceName != "" {
		w.services = newObjectStore(w.client.CoreV1().Services(w.src.serviceNamespace), &corev1.Service{},
			w.src.serviceNamespace, w.src.serviceName, w.notify)
		w.running.Go(func() { w.services.reflector.Run(w.stopCh) })
	}
	w.running.Go(w.loop)
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
	if w.stopCh == nil {
		return
	}
	close(w.stopCh)
	w.running.Wait()
	w.stopCh = nil
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
		case <-w.stopCh:
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
	// Whether both stores have their first list (a missing object is known
	// to be missing only then), read before the objects: a list landing in
	// between then only makes this rebuild stale, never marks stale records
	// synced (its own notification rebuilds again).
	listed := w.configMaps.hasListed() && w.services.hasListed()
	cm := w.configMaps.object()
	recs := w.build(cm, w.services.object())
	w.publish(recs)

	now := time.Now()
	entries.WithLabelValues(ref).Set(float64(len(recs.hosts)))
	lastSyncTimestamp.WithLabelValues(ref).Set(float64(now.UnixNano()) / 1e9)
	wasSynced := w.synced.Load()
	if !wasSynced && listed {
		w.synced.Store(true)
		log.Infof("%s synced: %d names", ref, len(recs.hosts))
	}
	if cm != nil {
		w.observeProgramming(cm.Annotations[tunnelnodes.LastChangeTriggerTimeAnnotation], now, wasSynced)
	}
}

// observeProgramming records how long a change took from the cluster event
// to live answers. Triggers seen in the initial list are old news, not latency.
func (w *watcher) observeProgramming(trigger string, now time.Time, wasSynced bool) {
	if trigger == "" || trigger == w.lastTrigger {
		return
	}
	w.lastTrigger = trigger
	t, err := time.Parse(time.RFC3339Nano, trigger)
	if err != nil || !wasSynced {
		return
	}
	programmingDuration.WithLabelValues(w.src.configMapRef()).Observe(now.Sub(t).Seconds())
}

// build computes the records from the objects. A text over the size limit
// is rejected whole, with its annotation: the last accepted ConfigMap is
// served instead. Rejections and skipped lines are counted and logged once
// per content.
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
			ref, w.src.configMapKey, len(text), tunnelnodes.MaxHostsBytes, len(recs.hosts))
	case len(skipped) > 0:
		parseErrors.WithLabelValues(ref).Add(float64(len(skipped)))
		const shown = 3
		var first []string
		for i := 0; i < len(skipped) && i < shown; i++ {
			first = append(first, skipped[i].Error())
		}
		log.Warningf("%s key %s: skipped %d malformed lines or names (%s)", ref, w.src.configMapKey, len(skipped), strings.Join(first, "; "))
	}
	return recs
}
