package sync

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

const metricsSubsystem = "tunnel_nodes_sync"

// Served by the manager's metrics endpoint with controller-runtime's own.
var (
	recordsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: metricsSubsystem, Name: "records",
		Help: "Nodes in the last computed records, by kind: edge, cloud, or skipped (no usable name or address).",
	}, []string{"kind"})
	writesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: metricsSubsystem, Name: "writes_total",
		Help: "Writes to the records ConfigMap or the tunnel Service.",
	}, []string{"object"})
	conflictsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: metricsSubsystem, Name: "write_conflicts_total",
		Help: "Writes rejected because the object changed since it was read; each is re-read and recomputed.",
	}, []string{"object"})
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: metricsSubsystem, Name: "errors_total",
		Help: "Syncs that could not write, by reason: too_large, no_tunnel_ip, api.",
	}, []string{"reason"})
	badPortEntriesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: metricsSubsystem, Name: "bad_port_entries_total",
		Help: "Server config port entries skipped because they are not valid or collide with another Service port.",
	})
	syncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: metricsSubsystem, Name: "sync_duration_seconds",
		Help:    "Time to compute and write the desired state once.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	lastSuccessTimestamp = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: metricsSubsystem, Name: "last_success_timestamp_seconds",
		Help: "When the records and ports were last confirmed in sync.",
	})
)

func init() {
	metrics.Registry.MustRegister(recordsGauge, writesTotal, conflictsTotal, errorsTotal,
		badPortEntriesTotal, syncDuration, lastSuccessTimestamp)
}
