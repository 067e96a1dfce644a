package promrelabel

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/steps"
	_ "github.com/yurtdns/yurtdns/internal/tunnelsync" // registers the sync's metrics
	_ "github.com/yurtdns/yurtdns/plugin/yurthosts"    // registers yurthosts' metrics

	// cmd/coredns-yurt links every stock plugin; this one's client-go
	// request counter counts yurthosts' requests too.
	_ "github.com/coredns/coredns/plugin/kubernetes"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"
)

const alertTests = "testdata/alerts_test.yaml"

var promqlParser = parser.NewParser(parser.Options{})

// ruleGroups is the spec of deploy/monitoring's PrometheusRule as a
// Prometheus rule file, checked by rulefmt as Prometheus loads one.
func ruleGroups(t *testing.T) (file []byte, groups *rulefmt.RuleGroups) {
	t.Helper()
	objs, err := deploy.Render(deploy.Monitoring)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "PrometheusRule" })
	if i < 0 {
		t.Fatal("deploy/monitoring has no PrometheusRule")
	}
	file, err = yaml.Marshal(objs[i].Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(file, false, model.UTF8Validation, promqlParser, promslog.NewNopLogger())
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("PrometheusRule %s: %v", objs[i].GetName(), err)
	}
	return file, groups
}

// TestAlertRules runs `promtool test rules` on testdata/alerts_test.yaml:
// promtool itself, at the version of this module's Prometheus, built
// without its service discoveries (which promtool's rule tests do not use).
// cmd/promtool is a main package, so it cannot be imported; a copy of its
// test runner would not be Prometheus's code.
func TestAlertRules(t *testing.T) {
	file, _ := ruleGroups(t)
	dir := t.TempDir()
	tests, err := os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"rules.yaml": file, "alerts_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	promtool := "github.com/prometheus/prometheus/cmd/promtool@" + prometheusVersion(t)
	out, err := exec.Command("go", "run", "-tags", "remove_all_sd", promtool, "test", "rules", filepath.Join(dir, "alerts_test.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// prometheusVersion is the version of Prometheus this module requires.
func prometheusVersion(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/prometheus/prometheus").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/prometheus/prometheus: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestAlertTestsCoverEveryAlert: every alert of the PrometheusRule is
// expected to fire in one test of alerts_test.yaml and not to in another,
// and the tests name no alert the rule lacks.
func TestAlertTestsCoverEveryAlert(t *testing.T) {
	_, groups := ruleGroups(t)
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
		}
	}
	b, err := os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string
				ExpAlerts []any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		}
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, test := range file.Tests {
		for _, c := range test.AlertRuleTest {
			if !slices.Contains(alerts, c.Alertname) {
				t.Errorf("%s tests %s, which the PrometheusRule does not have", alertTests, c.Alertname)
			}
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname] = true
			} else {
				silent[c.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] || !silent[a] {
			t.Errorf("%s: a case where it fires %v, where it does not %v; want both", a, fires[a], silent[a])
		}
	}
}

// registries are the metrics of each job the PodMonitors name, as its
// process registers them (this test links the same packages): the sync's
// in controller-runtime's registry, with controller-runtime's own;
// coredns-yurt's and the node-local caches' in client_golang's default one.
// "up" is Prometheus's own, for every job.
var registries = map[string]prometheus.Registerer{
	"tunnel-nodes-sync": ctrlmetrics.Registry,
	"coredns-yurt":      prometheus.DefaultRegisterer,
	"node-local-dns":    prometheus.DefaultRegisterer,
}

// registered reports whether reg has a metric named name: registering
// another metric of that name fails (with any help or labels) only then.
func registered(reg prometheus.Registerer, name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
	if err := reg.Register(probe); err != nil {
		return true
	}
	reg.Unregister(probe)
	return false
}

// TestAlertMetricsExist: every series an alert selects names a job of
// deploy/monitoring's PodMonitors and a metric that job's process
// registers, so a renamed metric or job fails here, not silently in
// Prometheus (an alert on a series that never exists never fires).
func TestAlertMetricsExist(t *testing.T) {
	_, groups := ruleGroups(t)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			expr, err := promqlParser.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			for _, path := range parser.ExtractSelectors(expr) {
				var name string
				var jobs []string
				for _, m := range path {
					switch m.Name {
					case "__name__":
						name = m.Value
					case "job":
						for job := range registries {
							if m.Matches(job) {
								jobs = append(jobs, job)
							}
						}
					}
				}
				if len(jobs) == 0 {
					t.Errorf("%s: %s selects no job of the PodMonitors", r.Alert, name)
				}
				for _, job := range jobs {
					if name != "up" && !registered(registries[job], name) {
						t.Errorf("%s: job %s has no metric %s", r.Alert, job, name)
					}
				}
			}
		}
	}
}

// TestPodMonitors: each PodMonitor sets the job the alerts select, and
// the node-local caches, on the host network, are scraped at their node's
// name with the prometheus step's own relabeling: Prometheus's relabel
// code gives worker-1:9253 for worker-1's cache.
func TestPodMonitors(t *testing.T) {
	objs, err := deploy.Render(deploy.Monitoring)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "PodMonitor" {
			continue
		}
		endpoints, _, err := unstructured.NestedSlice(o.Object, "spec", "podMetricsEndpoints")
		if err != nil || len(endpoints) != 1 {
			t.Fatalf("PodMonitor %s: endpoints %v %v", o.GetName(), endpoints, err)
		}
		endpoint := endpoints[0].(map[string]any)
		cfgs, err := Configs(endpoint["relabelings"].([]any))
		if err != nil {
			t.Fatalf("PodMonitor %s: %v", o.GetName(), err)
		}
		if cfgs[0].TargetLabel != "job" {
			t.Errorf("PodMonitor %s: first relabeling %v, want the job", o.GetName(), cfgs[0])
		}
		jobs[cfgs[0].Replacement] = true
		if o.GetName() != "node-local-dns" {
			continue
		}
		// No port: the caches declare none (a hostPort would block their
		// surge pods), so Prometheus finds the pod at its IP alone.
		if _, ok := endpoint["port"]; ok {
			t.Errorf("node-local-dns: endpoint names a port, which the DaemonSet does not declare: %v", endpoint)
		}
		addr, kept, err := Address(endpoint, map[string]string{"__address__": "192.168.0.21", steps.NodeExporterNodeNameLabel: "worker-1"})
		if err != nil || !kept || addr != "worker-1:9253" {
			t.Errorf("node-local-dns: scraped at %q (kept %v, %v), want worker-1:9253", addr, kept, err)
		}
	}
	for job := range registries {
		if !jobs[job] {
			t.Errorf("no PodMonitor sets job %s", job)
		}
	}
	if len(jobs) != len(registries) {
		t.Errorf("the PodMonitors set jobs %v; the alerts know %d", jobs, len(registries))
	}
}
