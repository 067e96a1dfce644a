package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
)

// edgeScraper is the mission's second user: a real Prometheus, run by
// prometheus-operator from kube-prometheus's manifests on master-2 (a
// control-plane node without yurt-tunnel-server, so without its DNAT
// rules), scraping worker-1's kubelet and node_exporter. Before install it
// has only worker-1's IP, which the cloud cannot reach; after install it
// scrapes by node name through the tunnel, and yurtdns's own PodMonitors
// and alerts work in it; after revert it is back at the IP. TestKubeadmUpgrade
// runs it around its install and revert, and the stack goes when that test
// ends.
type edgeScraper struct {
	worker *cluster.Node
	// node is where the Prometheus pod runs: the stack's nodeSelector says
	// which, and the pod is read rather than that repeated here.
	node           string
	monitorsBefore string
}

// startEdgeScraper brings the monitoring stack up (make monitoring built it
// beside the cluster's start), has worker-1 refuse its scrape ports to all
// but its tunnel agent, and checks that Prometheus sees worker-1's targets
// at its IP, down.
func startEdgeScraper(t *testing.T) *edgeScraper {
	built := <-monitoringBuilt
	monitoringBuilt <- built
	if built != nil {
		t.Fatal(built)
	}
	t.Logf("make monitoring, beside the cluster's start and the tests before: %s", monitoringBuildTime)
	s := &edgeScraper{worker: kc.Node("worker-1")}
	started := time.Now()
	if err := kc.ImportMonitoringImages(); err != nil {
		t.Fatal(err)
	}
	// An edge node behind a firewall: only the tunnel agent on the node
	// reaches its kubelet, node_exporter and cache.
	lift, err := s.worker.RefuseFromOutside(10250, 9100, 9253)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lift(); err != nil {
			t.Error(err)
		}
	})
	applyMonitoringStack(t)
	pod, err := cs.CoreV1().Pods("monitoring").Get(context.Background(), "prometheus-k8s-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.node = pod.Spec.NodeName; s.node == kc.Master().Name {
		t.Fatalf("Prometheus runs on %s, yurt-tunnel-server's node, whose DNAT rules reach the edge without DNS", s.node)
	}
	t.Logf("prometheus-operator, node_exporter and Prometheus (on %s) running in %s", s.node, time.Since(started).Round(100*time.Millisecond))

	// As the article: node_exporter's 9100 (TLS) and the caches' 9253
	// (plain HTTP) become tunnel ports, and the sync maps them.
	setServerConfig(t, map[string]any{"https-proxy-ports": "9100", "http-proxy-ports": "9253"})
	t.Cleanup(func() { setServerConfig(t, map[string]any{"https-proxy-ports": nil, "http-proxy-ports": nil}) })
	waitServicePort(t, "dnat-9100", tunnelnodes.DefaultHTTPSTargetPort, true)
	waitServicePort(t, "dnat-9253", tunnelnodes.DefaultHTTPTargetPort, true)

	t.Run("Prometheus before install: worker-1's targets are its IP, down", func(t *testing.T) {
		waitTargets(t, edgeTargets(s.worker, s.worker.IP), "down", time.Minute)
	})
	s.monitorsBefore = serviceMonitors(t)
	return s
}

// checkInstalled: after an install that began at began and ended at ended,
// worker-1's targets are its name and up, its series answer in PromQL,
// yurtdns's PodMonitors and rules are in, and its alerts tell an edge node
// cut off from the cloud from a fault.
func (s *edgeScraper) checkInstalled(t *testing.T, began, ended time.Time) {
	t.Run("Prometheus after install: worker-1's targets are its name, up through the tunnel", func(t *testing.T) {
		took := waitTargets(t, edgeTargets(s.worker, s.worker.Name), "up", time.Minute)
		t.Logf("up %s after install ended, %s after it began (scrape interval 15 s, the kubelet's 30 s)", took, ended.Sub(began).Round(time.Second)+took)
	})
	t.Run("PromQL: node_exporter's and the kubelet's series of worker-1", func(t *testing.T) {
		for _, q := range []string{`node_uname_info{instance="worker-1"}`, `kubelet_running_pods{node="worker-1"}`} {
			harness.Eventually(t, time.Minute, func() error {
				n, err := querySeries(q)
				if err == nil && n == 0 {
					err = fmt.Errorf("no series")
				}
				if err == nil {
					t.Logf("%s: %d series", q, n)
				}
				return err
			})
		}
	})
	t.Run("yurtdns's PodMonitors and rules", func(t *testing.T) {
		waitTargets(t, []wantTarget{
			{job: "tunnel-nodes-sync"},
			{job: "coredns-yurt"},
			{job: "node-local-dns", url: "http://" + kc.Master().Name + ":9253/metrics"},
			{job: "node-local-dns", url: "http://" + s.node + ":9253/metrics"},
			{job: "node-local-dns", url: "http://" + s.worker.Name + ":9253/metrics"},
		}, "up", 2*time.Minute)
		checkRuleGroups(t)
	})
	t.Run("alerts", checkEdgeAwareAlerts)
}

// checkReverted: after a revert that began at began, kube-prometheus's
// ServiceMonitors are as before install and worker-1's targets are its IP
// again, down.
func (s *edgeScraper) checkReverted(t *testing.T, began time.Time) {
	if now := serviceMonitors(t); now != s.monitorsBefore {
		t.Errorf("kube-prometheus's ServiceMonitors after revert:\n%s\nbefore install:\n%s", now, s.monitorsBefore)
	}
	ended := time.Now()
	t.Run("Prometheus after revert: worker-1's targets are its IP again, down", func(t *testing.T) {
		took := waitTargets(t, edgeTargets(s.worker, s.worker.IP), "down", 2*time.Minute)
		t.Logf("back %s after revert ended, %s after it began", took, ended.Sub(began).Round(time.Second)+took)
	})
}

// monitoringBuilt is make monitoring's result: TestMain starts it beside
// the cluster's start, at the lowest CPU priority, so that the build (about
// 8 minutes of 2 cores cold, nothing once built: it is cached as the other
// tools are) fills the time the tests before this one spend waiting on the
// cluster instead of adding to make test's.
var (
	monitoringBuilt     = make(chan error, 1)
	monitoringBuildTime time.Duration
)

// monitoringBuild is make monitoring running, in a process group of its
// own so that stop ends its go build too.
type monitoringBuild struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startMonitoringBuild(root string) (*monitoringBuild, error) {
	cmd := exec.Command("nice", "-n", "19", "make", "--no-print-directory", "monitoring")
	cmd.Dir = root
	// Not make test's jobserver: this build is on its own.
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &monitoringBuild{cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		monitoringBuildTime = time.Since(start).Round(time.Second)
		if err != nil {
			err = fmt.Errorf("make monitoring: %v\n%s", err, lastLines(out.String(), 30))
		}
		close(b.done)
		monitoringBuilt <- err
	}()
	return b, nil
}

// stop ends the build if it still runs: the tests that wanted it are over.
func (b *monitoringBuild) stop() {
	select {
	case <-b.done:
	default:
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	}
}

// applyMonitoringStack creates prometheus-operator's CRDs and then
// test/testdata/monitoring (the operator, node_exporter, kube-prometheus's
// ServiceMonitors, the Prometheus on master-2), and waits until Prometheus
// answers. It is deleted when the test ends.
func applyMonitoringStack(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	root, _ := harness.RepoRoot()
	cert, key := selfSignedFiles(t, "node-exporter")
	crds := kc.PrometheusOperatorCRDs()
	stack := filepath.Join(root, "test", "testdata", "monitoring")
	t.Cleanup(func() { deleteMonitoringStack(t, stack, crds) })
	steps := [][]string{
		{"apply", "--server-side", "-f", crds},
		{"wait", "--for=condition=established", "--timeout=60s", "-f", crds},
		{"apply", "--server-side", "-f", filepath.Join(stack, "namespace.yaml")},
		{"-n", "monitoring", "create", "secret", "tls", "node-exporter-tls", "--cert", cert, "--key", key},
		{"apply", "--server-side", "-k", stack},
		{"-n", "monitoring", "rollout", "status", "deployment/prometheus-operator", "--timeout=3m"},
		{"-n", "monitoring", "rollout", "status", "daemonset/node-exporter", "--timeout=3m"},
	}
	for _, s := range steps {
		if out, err := kc.Kubectl(ctx, s...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(s, " "), err, out)
		}
	}
	harness.Eventually(t, 3*time.Minute, func() error {
		_, err := prometheusAPI("/-/ready")
		return err
	})
}

// deleteMonitoringStack deletes the stack and waits until its namespace is
// gone: the tests after this one create "monitoring" again, which a
// namespace still terminating refuses. Prometheus's pod goes first: the
// namespace controller looks again after half the longest
// terminationGracePeriodSeconds of the pods it found, and the operator
// gives Prometheus 600 s, so a namespace deleted with it stays for 5
// minutes however soon the pod ends (4m20s in the fresh-clone run at
// b4b5d7b; 38 s with the pod first).
func deleteMonitoringStack(t *testing.T, stack, crds string) {
	ctx := context.Background()
	began := time.Now()
	for _, args := range [][]string{
		{"-n", "monitoring", "delete", "prometheus", "k8s", "--ignore-not-found", "--wait=true", "--timeout=1m"},
		{"-n", "monitoring", "wait", "--for=delete", "pod/prometheus-k8s-0", "--timeout=3m"},
		{"delete", "-k", stack, "--ignore-not-found", "--wait=true", "--timeout=4m"},
	} {
		if out, err := kc.Kubectl(ctx, args...); err != nil {
			t.Logf("%v\n%s", err, out)
		}
	}
	defer func() {
		if out, err := kc.Kubectl(ctx, "delete", "-f", crds, "--ignore-not-found"); err != nil {
			t.Errorf("deleting prometheus-operator's CRDs: %v\n%s", err, out)
		}
		t.Logf("monitoring stack deleted in %s", time.Since(began).Round(100*time.Millisecond))
	}()
	harness.Eventually(t, 2*time.Minute, func() error {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "monitoring", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("namespace monitoring still %s: %+v", ns.Status.Phase, ns.Status.Conditions)
	})
}

// prometheusAPI GETs path of the Prometheus pod through the apiserver's pod
// proxy, as `kubectl get --raw` does.
func prometheusAPI(path string) ([]byte, error) {
	out, err := kc.Kubectl(context.Background(), "get", "--raw", "/api/v1/namespaces/monitoring/pods/prometheus-k8s-0:9090/proxy"+path)
	return []byte(out), err
}

// prometheusData GETs an API path and decodes its data.
func prometheusData(path string, data any) error {
	raw, err := prometheusAPI(path)
	if err != nil {
		return err
	}
	var resp struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return fmt.Errorf("%s: %v: %.200s", path, err, raw)
	}
	if resp.Status != "success" {
		return fmt.Errorf("%s: %s %s", path, resp.Status, resp.Error)
	}
	return json.Unmarshal(resp.Data, data)
}

type promTarget struct {
	Labels     map[string]string `json:"labels"`
	ScrapePool string            `json:"scrapePool"`
	ScrapeURL  string            `json:"scrapeUrl"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
}

// edgeTargets are worker's kubelet and node_exporter targets scraped at by
// (its IP or its name). The kubelet's carry the node's name as the operator
// labels them, node_exporter's as kube-prometheus's relabeling does,
// whichever address they are scraped at.
func edgeTargets(worker *cluster.Node, by string) []wantTarget {
	return []wantTarget{
		{job: "kubelet", url: "https://" + by + ":10250/metrics", label: "node", value: worker.Name},
		{job: "kubelet", url: "https://" + by + ":10250/metrics/cadvisor", label: "node", value: worker.Name},
		{job: "node-exporter", url: "https://" + by + ":9100/metrics", label: "instance", value: worker.Name},
	}
}

// wantTarget is an active target of job; url, when set, is its scrape URL,
// and label, when set, a label that must be value (the node it is of).
type wantTarget struct {
	job, url, label, value string
}

func (w wantTarget) matches(tg promTarget) bool {
	return tg.Labels["job"] == w.job && (w.url == "" || tg.ScrapeURL == w.url) && (w.label == "" || tg.Labels[w.label] == w.value)
}

// waitTargets waits until every wanted target is active with health, and
// returns how long it took.
func waitTargets(t *testing.T, want []wantTarget, health string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	harness.Eventually(t, within, func() error {
		var data struct {
			ActiveTargets []promTarget `json:"activeTargets"`
		}
		if err := prometheusData("/api/v1/targets?state=active", &data); err != nil {
			return err
		}
		var missing []string
		for _, w := range want {
			i := slices.IndexFunc(data.ActiveTargets, w.matches)
			switch {
			case i < 0:
				missing = append(missing, fmt.Sprintf("%s %s: no such target", w.job, w.url))
			case data.ActiveTargets[i].Health != health:
				tg := data.ActiveTargets[i]
				missing = append(missing, fmt.Sprintf("%s %s: %s (%s)", w.job, tg.ScrapeURL, tg.Health, tg.LastError))
			}
		}
		if len(missing) > 0 {
			var urls []string
			for _, tg := range data.ActiveTargets {
				urls = append(urls, tg.Labels["job"]+" "+tg.ScrapeURL+" "+tg.Health)
			}
			return fmt.Errorf("want %s: %s\nactive targets:\n%s", health, strings.Join(missing, "; "), strings.Join(urls, "\n"))
		}
		return nil
	})
	return time.Since(start).Round(100 * time.Millisecond)
}

// querySeries runs an instant PromQL query and returns how many series it
// gave.
func querySeries(q string) (int, error) {
	var data struct {
		Result []json.RawMessage `json:"result"`
	}
	err := prometheusData("/api/v1/query?query="+url.QueryEscape(q), &data)
	return len(data.Result), err
}

// checkRuleGroups: the operator loaded the PrometheusRule yurtdns that
// install's monitoring step made, every group of it.
func checkRuleGroups(t *testing.T) {
	t.Helper()
	out, err := kc.Kubectl(context.Background(), "-n", "kube-system", "get", "prometheusrule", "yurtdns", "-o", "jsonpath={.spec.groups[*].name}")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(out)
	if len(want) == 0 {
		t.Fatal("PrometheusRule yurtdns has no groups")
	}
	harness.Eventually(t, 2*time.Minute, func() error {
		var data struct {
			Groups []struct {
				Name  string            `json:"name"`
				Rules []json.RawMessage `json:"rules"`
			} `json:"groups"`
		}
		if err := prometheusData("/api/v1/rules", &data); err != nil {
			return err
		}
		var loaded []string
		for _, g := range data.Groups {
			loaded = append(loaded, g.Name)
		}
		for _, w := range want {
			if !slices.Contains(loaded, w) {
				return fmt.Errorf("rule group %s not loaded; loaded: %v", w, loaded)
			}
		}
		t.Logf("the rules API lists the %d groups of PrometheusRule yurtdns: %v", len(want), want)
		return nil
	})
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func activeAlerts() ([]promAlert, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := prometheusData("/api/v1/alerts", &data)
	return data.Alerts, err
}

// checkEdgeAwareAlerts runs three faults at once, each on its own node or
// component, and reads the alerts API: the sync scaled to 0 gives
// YurtDNSSyncNotLeading; master-1's cache stopped gives
// YurtDNSNodeLocalCacheDown for master-1; worker-1 cut off from the cloud
// for longer than that rule's `for` (2 minutes) gives no critical alert, and
// YurtDNSNodeLocalCacheUnobserved pending (info) instead.
func checkEdgeAwareAlerts(t *testing.T) {
	ctx := context.Background()
	master, worker := kc.Master(), kc.Node("worker-1")
	// Install's control-plane step restarted each kube-apiserver and the
	// sync rode it out: what went pending then has 2 minutes to clear.
	harness.Eventually(t, 2*time.Minute, func() error {
		if alerts, err := activeAlerts(); err != nil || len(alerts) > 0 {
			return fmt.Errorf("before the faults, alerts %v (%v), want none", alerts, err)
		}
		return nil
	})
	scale := func(replicas string) {
		if out, err := kc.Kubectl(ctx, "-n", "kube-system", "scale", "deployment/tunnel-nodes-sync", "--replicas="+replicas); err != nil {
			t.Errorf("scale: %v %s", err, out)
		}
	}
	scale("0")
	defer scale("2")
	cache := podOn(t, "k8s-app=node-local-dns", master.Name)
	p, err := cs.CoreV1().Pods("kube-system").Get(ctx, cache, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid := containerProcess(t, p)
	// Stopped, the cache keeps its pod and its target; its health check
	// fails and the kubelet restarts it in under a minute, as a crash loop.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	cut := time.Now()
	links := []func(){cutOff(t, worker)}
	linkBack := func() {
		for _, l := range links {
			l()
		}
		links = nil
	}
	defer func() {
		if links != nil {
			linkBack()
		}
	}()

	seen := map[string]time.Duration{} // alert/node/state: first seen after the cut
	var critical []string
	for time.Since(cut) < 2*time.Minute+45*time.Second {
		alerts, err := activeAlerts()
		if err != nil {
			t.Logf("alerts API: %v", err)
		}
		for _, a := range alerts {
			key := a.Labels["alertname"] + "/" + a.Labels["node"] + "/" + a.State
			if _, ok := seen[key]; !ok {
				seen[key] = time.Since(cut).Round(time.Second)
			}
			if a.Labels["severity"] == "critical" && a.Labels["node"] == worker.Name && a.State == "firing" {
				critical = append(critical, key)
			}
		}
		time.Sleep(5 * time.Second)
	}
	linkBack()
	syscall.Kill(pid, syscall.SIGCONT)
	scale("2")
	t.Logf("alerts seen, first after the faults began: %v", seen)
	if len(critical) > 0 {
		t.Errorf("worker-1 cut off from the cloud paged: %v", critical)
	}
	for _, want := range []string{"YurtDNSSyncNotLeading/", "YurtDNSNodeLocalCacheDown/" + master.Name, "YurtDNSNodeLocalCacheUnobserved/" + worker.Name} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(seen)), func(k string) bool { return strings.HasPrefix(k, want+"/") }) {
			t.Errorf("no %s alert (pending or firing) while its fault lasted", want)
		}
	}
	// The agent kept its dead connection through the cut (restartTunnelAgent
	// says why): restarted, it dials the tunnel server again, and Prometheus
	// sees worker-1's targets back through it.
	waitNodeReady(t, worker.Name, true, 3*time.Minute)
	deleteTunnelAgent(t)
	took := waitTargets(t, edgeTargets(worker, worker.Name), "up", 3*time.Minute)
	t.Logf("worker-1's targets up again %s after the tunnel agent's restart", took)
	waitSyncAvailable(t)
}

// selfSignedFiles writes a throwaway certificate for name (client-go's
// self-signed pair: a CA and a serving certificate it signed) and its key
// as PEM files in a test directory, as kubectl create secret tls reads them.
func selfSignedFiles(t *testing.T, name string) (cert, key string) {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
