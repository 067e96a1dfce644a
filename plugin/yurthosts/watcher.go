package yurthosts

import (
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// watcher runs one reflector for the records ConfigMap and one for the
// tunnel Service, each field-selected to its single object, and rebuilds
// the records whenever either changes.
type watcher struct {
	src     source
	client  kubernetes.Interface
	publish func(*records)

	configMaps, services *objectWatch
	changed              chan struct{}
	stopCh               chan struct{}
	running              sync.WaitGroup
	synced               atomic.Bool

	// Owned by the rebuild loop.
	text, annotated string
	entries         []tunnelnodes.HostEntry
	// tunnelIPs are the ClusterIPs the served entries were rendered for.
	tunnelIPs   []netip.Addr
	lastTrigger string
}

func newWatcher(src source, client kubernetes.Interface, publish func(*records)) *watcher {
	return &watcher{src: src, client: client, publish: publish}
}

// reconnectBackoff replaces client-go's default reflector backoff, which
// grows to 30–60 s during a long apiserver outage: a DNS server must see
// the first change made after the apiserver is back within a second. Retries
// come every 0.5–0.75 s: while the apiserver is down each is one refused
// connection; once it is back, one list (or watch-list) of a single object.
// Throttling (429 with Retry-After) is waited out inside client-go's REST
// client before the reflector sees an error.
var reconnectBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 4, Cap: 500 * time.Millisecond}

// objectWatch is a store kept by a reflector for one object; every change,
// including a relist after reconnecting, asks the loop for a rebuild.
type objectWatch struct {
	cache.Store
	reflector *cache.Reflector
	listed    atomic.Bool
	notify    func()
}

func (w *watcher) watch(resource, namespace, name string, obj k8sruntime.Object) *objectWatch {
	lw := cache.NewFilteredListWatchFromClient(w.client.CoreV1().RESTClient(), resource, namespace,
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	ow := &objectWatch{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), notify: w.notify}
	backoff := reconnectBackoff
	ow.reflector = cache.NewReflectorWithOptions(lw, obj, ow, cache.ReflectorOptions{
		Name:    namespace + "/" + name,
		Backoff: &backoff,
	})
	return ow
}

func (o *objectWatch) Add(obj any) error    { return o.changed(o.Store.Add(obj)) }
func (o *objectWatch) Update(obj any) error { return o.changed(o.Store.Update(obj)) }
func (o *objectWatch) Delete(obj any) error { return o.changed(o.Store.Delete(obj)) }

func (o *objectWatch) Replace(list []any, resourceVersion string) error {
	err := o.Store.Replace(list, resourceVersion)
	o.listed.Store(true)
	return o.changed(err)
}

func (o *objectWatch) changed(err error) error {
	o.notify()
	return err
}

// hasListed reports whether the first list is in (true for no watch).
func (o *objectWatch) hasListed() bool { return o == nil || o.listed.Load() }

// start launches the watches and the rebuild loop.
func (w *watcher) start() {
	// Export every series from the start, so a zero is visible as a zero.
	ref := w.src.configMapRef()
	parseErrors.WithLabelValues(ref).Add(0)
	entries.WithLabelValues(ref).Add(0)
	w.changed = make(chan struct{}, 1)
	w.stopCh = make(chan struct{})
	w.configMaps = w.watch("configmaps", w.src.configMapNamespace, w.src.configMapName, &corev1.ConfigMap{})
	watches := []*objectWatch{w.configMaps}
	if w.src.serviceName != "" {
		w.services = w.watch("services", w.src.serviceNamespace, w.src.serviceName, &corev1.Service{})
		watches = append(watches, w.services)
	}
	for _, ow := range watches {
		w.running.Go(func() { ow.reflector.Run(w.stopCh) })
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

// listed reports whether every watch has its first list in (a missing
// object is known to be missing only then).
func (w *watcher) listed() bool {
	return w.configMaps.hasListed() && w.services.hasListed()
}

// notify asks the loop for a rebuild; bursts coalesce into one.
func (w *watcher) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *watcher) loop() {
	for {
		select {
		case <-w.stopCh:
			return
		case <-w.changed:
			w.rebuild()
		}
	}
}

// rebuild computes the records from the watches' current objects
// (level-triggered: it does not matter which event woke it) and publishes them.
func (w *watcher) rebuild() {
	ref := w.src.configMapRef()
	// Read before the objects: a list landing in between then only makes
	// this rebuild stale, never marks stale records synced (its own
	// notification rebuilds again).
	listed := w.listed()
	cm := w.configMap()
	w.updateEntries(cm)
	recs := buildRecords(w.entries, w.tunnel())
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

func (w *watcher) configMap() *corev1.ConfigMap {
	obj, ok, _ := w.configMaps.GetByKey(w.src.configMapRef())
	if !ok {
		return nil
	}
	return obj.(*corev1.ConfigMap)
}

// updateEntries parses the ConfigMap text and its tunnel ClusterIPs
// annotation when they changed. Skipped lines are counted and logged once per
// content; an oversized value is rejected whole and the previous records
// stay, with the annotation they came with.
func (w *watcher) updateEntries(cm *corev1.ConfigMap) {
	var text, annotated string
	if cm != nil {
		text = cm.Data[w.src.configMapKey]
		annotated = cm.Annotations[tunnelnodes.TunnelClusterIPsAnnotation]
	}
	if text == w.text && annotated == w.annotated {
		return
	}
	textChanged := text != w.text
	ref := w.src.configMapRef()
	w.text, w.annotated = text, annotated
	if len(text) > tunnelnodes.MaxHostsBytes {
		if textChanged {
			parseErrors.WithLabelValues(ref).Inc()
			log.Errorf("%s key %s is %d bytes, over the %d byte limit: ignored, keeping the previous %d records",
				ref, w.src.configMapKey, len(text), tunnelnodes.MaxHostsBytes, len(w.entries))
		}
		return
	}
	w.tunnelIPs = tunnelnodes.ParseClusterIPs(annotated)
	if !textChanged {
		return
	}
	entries, skipped := tunnelnodes.ParseHosts(text)
	w.entries = entries
	if len(skipped) == 0 {
		return
	}
	parseErrors.WithLabelValues(ref).Add(float64(len(skipped)))
	const shown = 3
	var first []string
	for i := 0; i < len(skipped) && i < shown; i++ {
		first = append(first, skipped[i].Error())
	}
	log.Warningf("%s key %s: skipped %d malformed lines or names (%s)", ref, w.src.configMapKey, len(skipped), strings.Join(first, "; "))
}

// tunnel reads the Service's current ClusterIPs (none when it is headless
// or absent) and pairs them with the annotated ones.
func (w *watcher) tunnel() tunnel {
	var svc *corev1.Service
	if w.services != nil {
		if obj, ok, _ := w.services.GetByKey(w.src.serviceNamespace + "/" + w.src.serviceName); ok {
			svc = obj.(*corev1.Service)
		}
	}
	return newTunnel(w.tunnelIPs, tunnelnodes.ServiceClusterIPs(svc))
}
