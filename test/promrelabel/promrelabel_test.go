package promrelabel

import (
	"os"
	"testing"

	"github.com/yurtdns/yurtdns/internal/install/steps"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// relabelled is the kube-prometheus-shaped ServiceMonitor after install's
// prometheus step (the step's own edit, applied to the fixture).
func relabelled(t *testing.T, file, nodeNameLabel string) []any {
	t.Helper()
	b, err := os.ReadFile("../testdata/monitoring/" + file)
	if err != nil {
		t.Fatal(err)
	}
	sm := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &sm.Object); err != nil {
		t.Fatal(err)
	}
	if err := steps.AddNodeNameRelabeling(sm, nodeNameLabel); err != nil {
		t.Fatal(err)
	}
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if err != nil || len(endpoints) == 0 {
		t.Fatalf("endpoints: %v %v", endpoints, err)
	}
	return endpoints
}

// TestServiceMonitorTargetByNodeName: Prometheus's relabel code, given the
// discovery labels of worker-1's kubelet Endpoints address (prometheus-operator
// points it at the Node) and of its node-exporter pod, scrapes worker-1:10250
// and worker-1:9100; IPv6 keeps its port; without a node name the address stays.
func TestServiceMonitorTargetByNodeName(t *testing.T) {
	kubelet := map[string]string{"__address__": "192.168.0.21:10250", steps.KubeletNodeNameLabel: "worker-1",
		"__meta_kubernetes_endpoint_address_target_kind": "Node", "__metrics_path__": "/metrics/cadvisor", "__scheme__": "https"}
	exporter := map[string]string{"__address__": "192.168.0.21:9100", steps.NodeExporterNodeNameLabel: "worker-1",
		"__meta_kubernetes_pod_name": "node-exporter-abcde", "__metrics_path__": "/metrics"}
	for _, c := range []struct {
		file, label string
		discovered  map[string]string
		want        string
	}{
		{"kubernetesControlPlane-serviceMonitorKubelet.yaml", steps.KubeletNodeNameLabel, kubelet, "worker-1:10250"},
		{"nodeExporter-serviceMonitor.yaml", steps.NodeExporterNodeNameLabel, exporter, "worker-1:9100"},
		{"kubernetesControlPlane-serviceMonitorKubelet.yaml", steps.KubeletNodeNameLabel,
			map[string]string{"__address__": "[fd00::21]:10250", steps.KubeletNodeNameLabel: "worker-1"}, "worker-1:10250"},
		{"kubernetesControlPlane-serviceMonitorKubelet.yaml", steps.KubeletNodeNameLabel,
			map[string]string{"__address__": "192.168.0.21:10250", steps.KubeletNodeNameLabel: ""}, "192.168.0.21:10250"},
	} {
		for i, e := range relabelled(t, c.file, c.label) {
			got, kept, err := Address(e.(map[string]any), c.discovered)
			if err != nil || !kept || got != c.want {
				t.Errorf("%s endpoint %d, %v: %q kept %v err %v, want %q", c.file, i, c.discovered, got, kept, err, c.want)
			}
		}
	}
	// Before the step, the same target is scraped by IP.
	if got, _, _ := Address(map[string]any{}, kubelet); got != "192.168.0.21:10250" {
		t.Errorf("without relabelings: %q", got)
	}
}
