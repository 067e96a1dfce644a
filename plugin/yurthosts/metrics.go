package yurthosts

import (
	"github.com/coredns/coredns/plugin"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Registered once per process (promauto at package init), so a Corefile
// reload that builds new plugin instances never registers twice. The label
// is the ConfigMap ("namespace/name") the records come from.
var (
	entries = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "entries",
		Help:      "The number of names yurthosts answers.",
	}, []string{"configmap"})

	lastSyncTimestamp = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "last_sync_timestamp_seconds",
		Help:      "When the records were last rebuilt from the API, in seconds since the epoch.",
	}, []string{"configmap"})

	parseErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "parse_errors_total",
		Help:      "Lines or names of the records ConfigMap that were skipped, and values rejected as too large.",
	}, []string{"configmap"})

	shardsServed = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "shards",
		Help:      "Shards of the records served (their union); 0 while the single records ConfigMap is served.",
	}, []string{"configmap"})
	programmingDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "programming_duration_seconds",
		Help:      "From the change that triggered a records ConfigMap write (its yurtdns.io/last-change-trigger-time annotation) to the answers being live.",
		Buckets:   prometheus.ExponentialBuckets(0.001, 2, 18), // 1 ms .. 131 s
	}, []string{"configmap"})
)
