package main

import (
	"os"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/install/steps"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestRun(t *testing.T) {
	b, err := os.ReadFile("../../../testdata/monitoring/nodeExporter-serviceMonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sm := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &sm.Object); err != nil {
		t.Fatal(err)
	}
	if err := steps.AddNodeNameRelabeling(sm, steps.NodeExporterNodeNameLabel); err != nil {
		t.Fatal(err)
	}
	j, _ := sm.MarshalJSON()
	var out strings.Builder
	err = run(strings.NewReader(string(j)), &out, []string{"__address__=192.168.0.21:9100", steps.NodeExporterNodeNameLabel + "=worker-1"})
	if err != nil || out.String() != "0 worker-1:9100\n" {
		t.Errorf("got %q, %v", out.String(), err)
	}
	if err := run(strings.NewReader(string(j)), &out, []string{"novalue"}); err == nil {
		t.Error("want an error for an argument without =")
	}
}
