package tunnelsync

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestMetricsServedFromTheStart: a scrape of a sync that has not written
// yet already has every write, conflict and error series, at 0 or more.
func TestMetricsServedFromTheStart(t *testing.T) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				served[strings.TrimPrefix(f.GetName(), "tunnel_nodes_sync_")+"{"+l.GetName()+"="+l.GetValue()+"}"] = true
			}
		}
	}
	for _, want := range []string{
		"writes_total{object=configmap}", "writes_total{object=shard}", "writes_total{object=service}",
		"write_conflicts_total{object=configmap}", "write_conflicts_total{object=shard}", "write_conflicts_total{object=service}",
		"errors_total{reason=too_large}", "errors_total{reason=no_tunnel_ip}", "errors_total{reason=no_shards_namespace}", "errors_total{reason=api}",
	} {
		if !served[want] {
			t.Errorf("tunnel_nodes_sync_%s not served", want)
		}
	}
	if n := testutil.CollectAndCount(writesTotal); n != 3 {
		t.Errorf("writes_total has %d series, want one per object: configmap, shard, service", n)
	}
}
