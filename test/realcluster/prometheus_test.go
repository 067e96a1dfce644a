package realcluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/test/harness"
)

// applyPrometheusFixtures makes what kube-prometheus would have: the
// ServiceMonitor CRD (a fixture) and kube-prometheus's kubelet and
// node-exporter ServiceMonitors (test/testdata/monitoring's) in monitoring,
// for install's prometheus step.
func applyPrometheusFixtures(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	root, _ := harness.RepoRoot()
	dir := filepath.Join(root, "test", "testdata", "prometheus")
	stack := filepath.Join(root, "test", "testdata", "monitoring")
	steps := [][]string{
		{"apply", "-f", filepath.Join(dir, "servicemonitor-crd.yaml")},
		{"wait", "--for=condition=established", "--timeout=60s", "crd/servicemonitors.monitoring.coreos.com"},
		{"create", "namespace", "monitoring"},
		{"apply", "-f", filepath.Join(stack, "kubernetesControlPlane-serviceMonitorKubelet.yaml"), "-f", filepath.Join(stack, "nodeExporter-serviceMonitor.yaml")},
	}
	for _, s := range steps {
		if _, err := kc.Kubectl(ctx, s...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		kc.Kubectl(ctx, "delete", "namespace", "monitoring", "--wait=false")
		kc.Kubectl(ctx, "delete", "-f", filepath.Join(dir, "servicemonitor-crd.yaml"), "--wait=false")
	})
}

// serviceMonitors is what revert must restore exactly: the two objects' specs.
func serviceMonitors(t testing.TB) string {
	out, err := kc.Kubectl(context.Background(), "-n", "monitoring", "get", "servicemonitor", "kubelet", "node-exporter", "-o", "jsonpath={.items[*].spec}")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// relabeledAddress is the address Prometheus scrapes for the first endpoint
// of a ServiceMonitor on the cluster, given a target's discovery labels:
// computed by Prometheus's own relabel code (test/promrelabel, a module of
// its own) from the rules as the cluster holds them.
func relabeledAddress(t *testing.T, serviceMonitor string, labels ...string) string {
	t.Helper()
	sm, err := kc.Kubectl(context.Background(), "-n", "monitoring", "get", "servicemonitor", serviceMonitor, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	root, _ := harness.RepoRoot()
	cmd := exec.Command("go", append([]string{"-C", filepath.Join(root, "test", "promrelabel"), "run", "./cmd/relabeled-address"}, labels...)...)
	cmd.Stdin = strings.NewReader(sm)
	var stderr strings.Builder
	cmd.Stderr = &stderr // go run's own lines ("go: downloading ...") are not the answer
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("relabeled-address: %v\n%s%s", err, out, stderr.String())
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	_, addr, _ := strings.Cut(first, " ")
	return addr
}

// checkPrometheusByName: after install's prometheus step, the targets
// Prometheus computes from the ServiceMonitors are node names, and fetched
// from a pod they reach the edge node through the tunnel. The kubelet answers
// the fetcher, which sends no token, with its metrics: yurt-tunnel-server
// opens TLS to the kubelet again with its own client certificate
// (tunnel-proxy-client, allowed nodes/metrics) and asks no certificate of
// its clients.
func checkPrometheusByName(t *testing.T) {
	worker := kc.Node("worker-1")
	kubelet := relabeledAddress(t, "kubelet", "__address__="+worker.IP+":10250", "__meta_kubernetes_endpoint_address_target_name=worker-1")
	exporter := relabeledAddress(t, "node-exporter", "__address__="+worker.IP+":9100", "__meta_kubernetes_pod_node_name=worker-1")
	if kubelet != "worker-1:10250" || exporter != "worker-1:9100" {
		t.Fatalf("Prometheus would scrape %q and %q, want worker-1:10250 and worker-1:9100", kubelet, exporter)
	}
	if out, ok := fetchFromPod(t, "https://"+exporter+"/metrics"); !ok || !strings.Contains(out, `probe_exporter_up{node="worker-1",peer="`+worker.IP+`"} 1`) {
		t.Errorf("the node-exporter target %s from a pod on master-1: %q", exporter, out)
	}
	if out, _ := fetchFromPod(t, "https://"+kubelet+"/metrics"); !strings.Contains(out, "kubelet_") {
		t.Errorf("the kubelet target %s from a pod on master-1: %q, want the kubelet's metrics", kubelet, out)
	}
}
