package tunnelsync

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metric names one of the sync's metrics: tunnel_nodes_sync_<name>.
func metric(name, help string) prometheus.Opts {
	return prometheus.Opts{Subsystem: "tunnel_nodes_sync", Name: name, Help: help}
}

// The label values of writes_total and write_conflicts_total (object), and
// of errors_total (reason).
const (
	objectConfigMap = "configmap"
	objectShard     = "shard"
	objectService   = "service"

	reasonTooLarge          = "too_large"
	reasonNoTunnelIP        = "no_tunnel_ip"
	reasonNoShardsNamespace = "no_shards_namespace"
	reasonAPI               = "api"
)

// Served by the manager's metrics endpoint with controller-runtime's own.
var (
	recordsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts(metric("records",
		"Nodes in the last computed records, by kind: edge, cloud, or skipped (no usable name or address).")), []string{"kind"})
	writesTotal = prometheus.NewCounterVec(prometheus.CounterOpts(metric("writes_total",
		"Writes to the records ConfigMap, a shard (deletes included) or the tunnel Service.")), []string{"object"})
	conflictsTotal = prometheus.NewCounterVec(prometheus.CounterOpts(metric("write_conflicts_total",
		"Writes rejected because the object changed since it was read; each is re-read and recomputed.")), []string{"object"})
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts(metric("errors_total",
		"Syncs that could not write, by reason: too_large (the single ConfigMap), no_tunnel_ip, no_shards_namespace, api.")), []string{"reason"})
	badPortEntriesTotal = prometheus.NewCounter(prometheus.CounterOpts(metric("bad_port_entries_total",
		"Server config port entries skipped because they are not valid or collide with another Service port.")))
	syncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: "tunnel_nodes_sync", Name: "sync_duration_seconds",
		Help:    "Time to compute and write the desired state once.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	singleConfigMapFits = prometheus.NewGauge(prometheus.GaugeOpts(metric("single_configmap_fits",
		"1 while the records fit in the single records ConfigMap (1 MiB), 0 when they no longer do and it is not written.")))
	shardsGauge = prometheus.NewGauge(prometheus.GaugeOpts(metric("shards",
		"ConfigMaps of the records' shard set last written (0: shards are off or not written yet).")))
	lastSuccessTimestamp = prometheus.NewGauge(prometheus.GaugeOpts(metric("last_success_timestamp_seconds",
		"When the records and ports were last confirmed in sync.")))
	kubeDNSTopologyRestoresTotal = prometheus.NewCounter(prometheus.CounterOpts(metric("kube_dns_topology_restores_total",
		"Times the kube-dns Service's openyurt.io/topologyKeys annotation was missing or different and was patched back (--kube-dns-topology).")))
)

func init() {
	metrics.Registry.MustRegister(recordsGauge, writesTotal, conflictsTotal, errorsTotal,
		badPortEntriesTotal, syncDuration, singleConfigMapFits, shardsGauge, lastSuccessTimestamp, kubeDNSTopologyRestoresTotal)
	// Each label value is served from the start, at 0: increase() and
	// rate() then count a process's first write or error too, and a series
	// missing means a sync that does not run, not one that never wrote.
	for _, object := range []string{objectConfigMap, objectShard, objectService} {
		writesTotal.WithLabelValues(object)
		conflictsTotal.WithLabelValues(object)
	}
	for _, reason := range []string{reasonTooLarge, reasonNoTunnelIP, reasonNoShardsNamespace, reasonAPI} {
		errorsTotal.WithLabelValues(reason)
	}
}
