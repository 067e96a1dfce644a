package steps

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func loadServiceMonitor(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("../../../test/testdata/monitoring/" + file)
	if err != nil {
		t.Fatal(err)
	}
	sm := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &sm.Object); err != nil {
		t.Fatal(err)
	}
	return sm
}

// The edit appends the rule to every endpoint once, and writing back the
// value read first restores the object exactly.
func TestServiceMonitorRelabelingsEdit(t *testing.T) {
	for file, label := range map[string]string{"kubernetesControlPlane-serviceMonitorKubelet.yaml": KubeletNodeNameLabel, "nodeExporter-serviceMonitor.yaml": NodeExporterNodeNameLabel} {
		t.Run(file, func(t *testing.T) {
			sm := loadServiceMonitor(t, file)
			orig := sm.DeepCopy()
			before, err := endpointRelabelings(sm)
			if err != nil {
				t.Fatal(err)
			}
			after, err := withRelabeling(before, NodeNameRelabeling(label))
			if err != nil {
				t.Fatal(err)
			}
			if after == before || !strings.Contains(after, label) {
				t.Fatalf("no rule added:\n%s", after)
			}
			if again, _ := withRelabeling(after, NodeNameRelabeling(label)); again != after {
				t.Errorf("second edit changed it:\n%s", again)
			}
			if err := setEndpointRelabelings(sm, after); err != nil {
				t.Fatal(err)
			}
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			for i, e := range endpoints {
				rules := e.(map[string]any)["relabelings"].([]any)
				if last := rules[len(rules)-1]; !reflect.DeepEqual(last, NodeNameRelabeling(label)) {
					t.Errorf("endpoint %d: last relabeling %v", i, last)
				}
				if len(rules) != 2 {
					t.Errorf("endpoint %d: %d relabelings, want kube-prometheus's and ours", i, len(rules))
				}
			}
			if got, _ := endpointRelabelings(sm); got != after {
				t.Errorf("read back %q, wrote %q", got, after)
			}
			if err := setEndpointRelabelings(sm, before); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(sm.Object, orig.Object) {
				t.Errorf("not restored exactly:\n%v\n%v", sm.Object, orig.Object)
			}
		})
	}
}

// An endpoint without relabelings gets them, and loses the key on restore.
func TestServiceMonitorRelabelingsAbsent(t *testing.T) {
	sm := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"endpoints": []any{
		map[string]any{"port": "https"}, map[string]any{"port": "http", "relabelings": []any{}}}}}}
	orig := sm.DeepCopy()
	before, _ := endpointRelabelings(sm)
	after, err := withRelabeling(before, NodeNameRelabeling(NodeExporterNodeNameLabel))
	if err != nil {
		t.Fatal(err)
	}
	if err := setEndpointRelabelings(sm, after); err != nil {
		t.Fatal(err)
	}
	if err := setEndpointRelabelings(sm, before); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sm.Object, orig.Object) {
		t.Errorf("absent and empty relabelings not told apart:\n%v\n%v", sm.Object, orig.Object)
	}
	// An endpoint added since: the recorded value no longer fits.
	endpoints := sm.Object["spec"].(map[string]any)["endpoints"].([]any)
	sm.Object["spec"].(map[string]any)["endpoints"] = append(endpoints, map[string]any{"port": "x"})
	if err := setEndpointRelabelings(sm, before); err == nil {
		t.Error("want an error for an endpoint count that changed")
	}
}

func FuzzParseNamespacedName(f *testing.F) {
	for _, s := range []string{"monitoring/kubelet", "a/b/c", "/x", "x/", "", "kubelet"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseNamespacedName(s)
		if err != nil {
			return
		}
		if k.Namespace == "" || k.Name == "" || k.String() != s {
			t.Errorf("%q parsed as %v", s, k)
		}
	})
}
