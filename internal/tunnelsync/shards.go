package tunnelsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	gosync "sync"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// shardWriters bounds the shard writes in flight: a new set of thousands of
// shards is written in seconds, within the client's QPS.
const shardWriters = 8

// shardsNamespaceRetry is how soon a sync that found no shards namespace
// tries again: the namespace's creation is no event the sync watches.
const shardsNamespaceRetry = 30 * time.Second

// syncShards writes the records of buckets (the node store's, counts in
// all) as the shard set of tunnelnodes.ShardCount (see the contract
// there): every shard of the set that differs, then, the set being
// complete, deletes every other shard of the records. A hand-edited or
// deleted shard is a difference like any other.
func (r *Reconciler) syncShards(ctx context.Context, buckets []bucketRecords, counts recordCounts, annotations map[string]string, triggered time.Time) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	ns := r.cfg.ShardsNamespace
	var stored corev1.ConfigMapList
	// Read-only: no per-sync copy of every shard.
	if err := r.client.List(ctx, &stored, client.InNamespace(ns), client.MatchingLabels{tunnelnodes.RecordsOfLabel: r.cfg.ConfigMap},
		client.UnsafeDisableDeepCopy); err != nil {
		errorsTotal.WithLabelValues(reasonAPI).Inc()
		return reconcile.Result{}, fmt.Errorf("listing shards in namespace %s: %w", ns, err)
	}
	cms := make([]*corev1.ConfigMap, len(stored.Items))
	for i := range stored.Items {
		cms[i] = &stored.Items[i]
	}
	sets, strays := tunnelnodes.ShardSets(r.cfg.ConfigMap, cms)
	current := 0
	if served, ok := tunnelnodes.ServedShardSet(sets); ok {
		current = served.Count
	}
	count := tunnelnodes.ShardCount(counts.names(), current)

	// The shards that differ from the cache's: a node change is one.
	var stale []int
	texts := make([]string, count)
	shardCounts := make([]recordCounts, count)
	var cached []*corev1.ConfigMap
	if set, ok := sets[count]; ok {
		cached = set.Shards
	}
	var entries []tunnelnodes.HostEntry
	for i := range count {
		entries = entries[:0]
		for b := i; b < len(buckets); b += count {
			entries = append(entries, buckets[b].entries...)
			shardCounts[i] = shardCounts[i].plus(buckets[b].counts)
		}
		texts[i] = tunnelnodes.RenderHosts(entries)
		if cached == nil || !r.shardUpToDate(cached[i], i, count, texts[i], annotations) {
			stale = append(stale, i)
		}
	}
	writes := make([]write, count)
	writeShard := func(ctx context.Context, i int) (err error) {
		writes[i], err = r.writeShard(ctx, i, count, texts[i], annotations)
		return err
	}
	var err error
	if r.shardsNamespaceMissing.Load() && len(stale) > 0 {
		// One request tells whether the namespace is there now, not one per shard.
		err, stale = writeShard(ctx, stale[0]), stale[1:]
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(shardWriters)
	for _, i := range stale {
		if err != nil {
			break
		}
		g.Go(func() error { return writeShard(gctx, i) })
	}
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return r.shardWriteFailed(ctx, err)
	}
	r.shardsNamespaceMissing.Store(false)
	r.shards.reset(shardCounts, texts)
	shardsGauge.Set(float64(count))

	// The set is complete: readers serve it, so the others can go.
	var old []*corev1.ConfigMap
	for c, set := range sets {
		if c != count {
			for _, cm := range set.Shards {
				if cm != nil {
					old = append(old, cm)
				}
			}
		}
	}
	old = append(old, strays...)
	g, gctx = errgroup.WithContext(ctx) // the first one's context ended with its Wait
	g.SetLimit(shardWriters)
	for _, cm := range old {
		g.Go(func() error { return r.deleteShard(gctx, cm) })
	}
	if err := g.Wait(); err != nil {
		errorsTotal.WithLabelValues(reasonAPI).Inc()
		return reconcile.Result{}, fmt.Errorf("deleting old shards in namespace %s: %w", ns, err)
	}

	written := 0
	for _, w := range writes {
		if w != noWrite {
			written++
		}
	}
	switch {
	case current != count:
		logger.Info("Wrote a new shard set", "namespace", ns, "shards", count, "previousShards", current,
			"names", counts.names(), "deletedOld", len(old))
	case written > 0 || len(old) > 0:
		logger.V(1).Info("Wrote shards", "namespace", ns, "shards", count, "written", written, "deleted", len(old), "sinceTrigger", time.Since(triggered))
	}
	return reconcile.Result{}, nil
}

// shardWriteFailed is the result of a sync whose shard write failed with
// err: a missing namespace is said once and tried again later.
func (r *Reconciler) shardWriteFailed(ctx context.Context, err error) (reconcile.Result, error) {
	ns := r.cfg.ShardsNamespace
	if namespaceMissing(err) {
		errorsTotal.WithLabelValues(reasonNoShardsNamespace).Inc()
		if !r.shardsNamespaceMissing.Swap(true) {
			log.FromContext(ctx).Error(err, "Shards not written: their namespace is missing (install's records step creates it; --shards-namespace='' writes only the single ConfigMap)",
				"namespace", ns)
		}
		return reconcile.Result{RequeueAfter: shardsNamespaceRetry}, nil
	}
	errorsTotal.WithLabelValues(reasonAPI).Inc()
	return reconcile.Result{}, fmt.Errorf("writing shards in namespace %s: %w", ns, err)
}

// shardRequest is the key of the sync of shard index of a set of count:
// the shard's name.
func (r *Reconciler) shardRequest(index, count int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.cfg.ShardsNamespace,
		Name: tunnelnodes.ShardName(r.cfg.ConfigMap, count, index)}}
}

// shardOf reads a shardRequest.
func (r *Reconciler) shardOf(req reconcile.Request) (index, count int, ok bool) {
	if r.cfg.ShardsNamespace == "" || req.Namespace != r.cfg.ShardsNamespace {
		return 0, 0, false
	}
	rest, ok := strings.CutPrefix(req.Name, r.cfg.ConfigMap+"-")
	c, i, cut := strings.Cut(rest, "-")
	if !ok || !cut {
		return 0, 0, false
	}
	index, count, err := tunnelnodes.ParseShard(i + "/" + c)
	return index, count, err == nil
}

// syncShard writes shard index of a set of count from the nodes of that
// shard alone. done is false, and nothing written, when the stored set is
// not of count, or the shard's new records would change the set's size:
// only a full sync writes a new set.
func (r *Reconciler) syncShard(ctx context.Context, index, count int, triggered time.Time) (result reconcile.Result, done bool, err error) {
	r.all.RLock()
	defer r.all.RUnlock()
	rules, annotations, ok, err := r.inputs(ctx, triggered)
	if !ok || err != nil {
		return reconcile.Result{}, true, err
	}
	entries, counts, skipped := desiredRecords(r.nodes.Shard(index, count), 0, rules)
	if !r.shards.keeps(index, count, counts) {
		return reconcile.Result{}, false, nil
	}
	logSkipped(ctx, skipped)
	text := tunnelnodes.RenderHosts(entries)
	w, err := r.writeShard(ctx, index, count, text, annotations)
	if err != nil {
		result, err := r.shardWriteFailed(ctx, err)
		return result, true, err
	}
	r.shardsNamespaceMissing.Store(false)
	setRecordsGauges(r.shards.set(index, counts, text))
	if w != noWrite {
		log.FromContext(ctx).V(1).Info("Wrote shard", "namespace", r.cfg.ShardsNamespace, "shard", tunnelnodes.FormatShard(index, count),
			"names", counts.names(), "sinceTrigger", time.Since(triggered))
	}
	return reconcile.Result{}, true, nil
}

// shardTally is what the records of each shard of the set last written
// count: one shard's sync knows from it whether the set keeps its size, and
// the records' totals, without a pass over the fleet.
type shardTally struct {
	mu gosync.Mutex
	// counts has an element per shard of the set; empty: none written yet.
	counts []recordCounts
	// textBytes are the bytes of each shard's text.
	textBytes []int
}

// reset starts the tally of a set just written whole.
func (t *shardTally) reset(counts []recordCounts, texts []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.counts = counts
	t.textBytes = make([]int, len(texts))
	for i, text := range texts {
		t.textBytes[i] = len(text)
	}
}

// count is the size of the set last written; 0: none.
func (t *shardTally) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.counts)
}

// keeps: the set written is of count, and with counts in shard index it
// keeps that size.
func (t *shardTally) keeps(index, count int, counts recordCounts) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.counts) != count {
		return false
	}
	return tunnelnodes.ShardCount(t.totalLocked().minus(t.counts[index]).plus(counts).names(), count) == count
}

// set records shard index written with counts and text, and returns the
// totals. The set is the one keeps checked: only a full sync resets it,
// and none runs during a shard's sync.
func (t *shardTally) set(index int, counts recordCounts, text string) recordCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.counts[index], t.textBytes[index] = counts, len(text)
	return t.totalLocked()
}

func (t *shardTally) totalLocked() recordCounts {
	var total recordCounts
	for _, c := range t.counts {
		total = total.plus(c)
	}
	return total
}

// bytes is the size of the shards' texts together: the single
// ConfigMap's text is at least that.
func (t *shardTally) bytes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, b := range t.textBytes {
		n += b
	}
	return n
}

// writeShard makes shard index of count hold text, with its label and
// annotations, keeping any other key, label and annotation.
func (r *Reconciler) writeShard(ctx context.Context, index, count int, text string, annotations map[string]string) (write, error) {
	key := types.NamespacedName{Namespace: r.cfg.ShardsNamespace, Name: tunnelnodes.ShardName(r.cfg.ConfigMap, count, index)}
	shard := tunnelnodes.FormatShard(index, count)
	return writeConflictSafe(ctx, r, objectShard, key, func(cm *corev1.ConfigMap, found bool) write {
		if found && r.shardUpToDate(cm, index, count, text, annotations) {
			return noWrite
		}
		if !found {
			cm.ObjectMeta = metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
		}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[tunnelnodes.RecordsOfLabel] = r.cfg.ConfigMap
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		maps.Copy(cm.Annotations, annotations)
		cm.Annotations[tunnelnodes.ShardAnnotation] = shard
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[r.cfg.ConfigMapKey] = text
		if !found {
			return create
		}
		return update
	})
}

// shardUpToDate: cm (nil: missing) is shard index of count holding text,
// rendered for the annotations' ClusterIPs.
func (r *Reconciler) shardUpToDate(cm *corev1.ConfigMap, index, count int, text string, annotations map[string]string) bool {
	return cm != nil && cm.Data[r.cfg.ConfigMapKey] == text && cm.Labels[tunnelnodes.RecordsOfLabel] == r.cfg.ConfigMap &&
		cm.Annotations[tunnelnodes.ShardAnnotation] == tunnelnodes.FormatShard(index, count) &&
		cm.Annotations[tunnelnodes.TunnelClusterIPsAnnotation] == annotations[tunnelnodes.TunnelClusterIPsAnnotation]
}

// deleteShard deletes cm, as it was read: a shard recreated since is kept.
func (r *Reconciler) deleteShard(ctx context.Context, cm *corev1.ConfigMap) error {
	err := r.client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		writesTotal.WithLabelValues(objectShard).Inc()
		r.own.forget(client.ObjectKeyFromObject(cm))
	}
	return err
}

// namespaceMissing: err is the API's answer to a create in a namespace that
// does not exist.
func namespaceMissing(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	return details != nil && details.Kind == "namespaces"
}
