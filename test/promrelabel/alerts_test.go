package promrelabel

import (
	"errors"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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

// ruleTest is one test of alerts_test.yaml, in promtool's format.
type ruleTest struct {
	Name          string
	AlertRuleTest []struct {
		EvalTime  string `json:"eval_time"`
		Alertname string
		ExpAlerts []any `json:"exp_alerts"`
	} `json:"alert_rule_test"`
}

// readRuleTests reads the tests of alerts_test.yaml.
func readRuleTests(t *testing.T) []ruleTest {
	t.Helper()
	b, err := os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Tests []ruleTest }
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	return file.Tests
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
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, test := range readRuleTests(t) {
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

// otherJobs are the jobs the alerts read that yurtdns does not scrape:
// only their "up" is used. The kubelet's is kube-prometheus's kubelet
// ServiceMonitor (test/testdata/monitoring/kubernetesControlPlane-serviceMonitorKubelet.yaml), whose targets
// prometheus-operator labels with their node.
var otherJobs = map[string]string{"kubelet": "../../test/testdata/monitoring/kubernetesControlPlane-serviceMonitorKubelet.yaml"}

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
				var jobs, others []string
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
						for job := range otherJobs {
							if m.Matches(job) {
								others = append(others, job)
							}
						}
					}
				}
				if len(jobs)+len(others) == 0 {
					t.Errorf("%s: %s selects no job of the PodMonitors nor %v", r.Alert, name, slices.Collect(maps.Keys(otherJobs)))
				}
				for _, job := range jobs {
					if name != "up" && !registered(registries[job], name) {
						t.Errorf("%s: job %s has no metric %s", r.Alert, job, name)
					}
				}
				if len(others) > 0 && name != "up" {
					t.Errorf("%s: %s of %v: of a job yurtdns does not scrape, only up is known", r.Alert, name, others)
				}
			}
		}
	}
}

// TestPodMonitors: each PodMonitor sets the job the alerts select, and
// the node-local caches, on the host network, are scraped at their node's
// name: Prometheus's relabel code makes of worker-1's cache pod (a target
// per container, as its discovery does) one target, worker-1:9253,
// labelled with its node as the alerts join it to the kubelet's.
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
		var targets []map[string]string
		for _, discovered := range podTargets(t, nodeLocalPod(t), "worker-1", "192.168.0.21") {
			target, kept, err := Relabel(endpoint, discovered)
			if err != nil {
				t.Fatal(err)
			}
			if kept {
				targets = append(targets, target)
			}
		}
		if len(targets) != 1 || targets[0]["__address__"] != "worker-1:9253" || targets[0]["node"] != "worker-1" {
			t.Errorf("node-local-dns: worker-1's cache pod gives targets %v, want one at worker-1:9253 labelled node worker-1", targets)
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

// TestOtherJobs: the job kube-prometheus's kubelet ServiceMonitor gives
// its targets is the one the alerts select (prometheus-operator takes it
// from the Service's label named by jobLabel: its kubelet Service carries
// the ServiceMonitor's selector labels).
func TestOtherJobs(t *testing.T) {
	for job, file := range otherJobs {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var sm struct {
			Spec struct {
				JobLabel string `json:"jobLabel"`
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &sm); err != nil {
			t.Fatal(err)
		}
		if got := sm.Spec.Selector.MatchLabels[sm.Spec.JobLabel]; got != job {
			t.Errorf("%s: its targets' job is %q, the alerts select %q", file, got, job)
		}
	}
}

// cutOffTest is the test of alerts_test.yaml where an edge node is cut
// off from the cloud, from cutOffFrom on, for longer than any alert's for.
const (
	cutOffTest = "edge node cut off from the cloud"
	cutOffFrom = 3 * time.Minute
)

// TestCutOffEdgeNodePagesNoOne: in cutOffTest, every critical alert of
// the PrometheusRule (today's and any added later) is asserted not firing
// at a time past its for into the cut (TestAlertRules runs them): an
// edge node cut off from the cloud is normal in OpenYurt, not a page.
func TestCutOffEdgeNodePagesNoOne(t *testing.T) {
	_, groups := ruleGroups(t)
	tests := readRuleTests(t)
	i := slices.IndexFunc(tests, func(tc ruleTest) bool { return tc.Name == cutOffTest })
	if i < 0 {
		t.Fatalf("%s has no test %q", alertTests, cutOffTest)
	}
	critical := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Labels["severity"] != "critical" {
				continue
			}
			critical++
			silentPastFor := false
			for _, c := range tests[i].AlertRuleTest {
				at, err := model.ParseDuration(c.EvalTime)
				if err != nil {
					t.Fatal(err)
				}
				if c.Alertname == r.Alert && len(c.ExpAlerts) == 0 && time.Duration(at) > cutOffFrom+time.Duration(r.For) {
					silentPastFor = true
				}
			}
			if !silentPastFor {
				t.Errorf("%s (critical, for %v): %q asserts it silent at no time past its for", r.Alert, r.For, cutOffTest)
			}
		}
	}
	if critical == 0 {
		t.Error("the PrometheusRule has no critical alert: nothing to check")
	}
}

// docsRunbooks is where every alert's runbook_url points, and the page's
// file in this repository.
const (
	docsRunbooks = "https://github.com/yurtdns/yurtdns/blob/main/docs/monitoring.md#"
	docsFile     = "../../docs/monitoring.md"
)

// headingAnchor is GitHub's anchor of a Markdown heading: lower case,
// punctuation but '-' and '_' dropped, spaces to '-'.
func headingAnchor(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = regexp.MustCompile("[^\\p{L}\\p{N} _-]").ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// TestRunbookURLs: every alert has a runbook_url to its own section of
// docs/monitoring.md, and that section exists.
func TestRunbookURLs(t *testing.T) {
	_, groups := ruleGroups(t)
	doc, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if heading, ok := strings.CutPrefix(line, "#"); ok {
			anchors[headingAnchor(strings.TrimLeft(heading, "#"))] = true
		}
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			url := r.Annotations["runbook_url"]
			if want := docsRunbooks + strings.ToLower(r.Alert); url != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, url, want)
			}
			if anchor, _ := strings.CutPrefix(url, docsRunbooks); !anchors[anchor] {
				t.Errorf("%s: docs/monitoring.md has no heading whose anchor is %q", r.Alert, anchor)
			}
		}
	}
}

// TestHeadingAnchor: GitHub's anchors of headings like docs/monitoring.md's.
func TestHeadingAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"YurtDNSNodeLocalCacheDown":           "yurtdnsnodelocalcachedown",
		" Why these thresholds":               "why-these-thresholds",
		"From an empty cluster to targets up": "from-an-empty-cluster-to-targets-up",
		"Not alerted on (yet)":                "not-alerted-on-yet",
		"`up` and the kubelet_job":            "up-and-the-kubelet_job",
	} {
		if got := headingAnchor(heading); got != want {
			t.Errorf("%q: %q, want %q", heading, got, want)
		}
	}
}

// nodeLocalPod is the pod template of deploy/node-local-dns's DaemonSet
// (install changes its images, addresses and ServiceAccount only).
func nodeLocalPod(t *testing.T) corev1.PodSpec {
	t.Helper()
	objs, err := deploy.Render(deploy.NodeLocalDNS)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			var ds appsv1.DaemonSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
				t.Fatal(err)
			}
			return ds.Spec.Template.Spec
		}
	}
	t.Fatalf("deploy/%s has no DaemonSet", deploy.NodeLocalDNS)
	return corev1.PodSpec{}
}

// podTargets are the discovery labels Prometheus's pod role gives a pod
// of spec on node at podIP (discovery/kubernetes/pod.go, buildPod): a
// target per container port, and one at the pod IP alone per container
// without ports, init containers included.
func podTargets(t *testing.T, spec corev1.PodSpec, node, podIP string) []map[string]string {
	t.Helper()
	var targets []map[string]string
	for i, c := range append(spec.Containers, spec.InitContainers...) {
		target := func(address string) map[string]string {
			return map[string]string{"__address__": address, steps.NodeExporterNodeNameLabel: node,
				"__meta_kubernetes_pod_container_name": c.Name, "__meta_kubernetes_pod_container_init": strconv.FormatBool(i >= len(spec.Containers))}
		}
		if len(c.Ports) == 0 {
			targets = append(targets, target(podIP))
		}
		for _, p := range c.Ports {
			tg := target(net.JoinHostPort(podIP, strconv.Itoa(int(p.ContainerPort))))
			tg["__meta_kubernetes_pod_container_port_name"] = p.Name
			targets = append(targets, tg)
		}
	}
	if len(targets) < 2 {
		t.Fatalf("a pod of %d targets: the test would not tell one target from several", len(targets))
	}
	return targets
}
