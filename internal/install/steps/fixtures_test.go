package steps

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// kubeadmObject decodes the object of the given kind from a fixture file.
func kubeadmObject(t *testing.T, file, kind string, into any) {
	t.Helper()
	repoObject(t, "test/testdata/kubeadm/"+file, kind, into)
}

// repoObject decodes the first object of the given kind from a YAML file of
// this repository (path from its root).
func repoObject(t *testing.T, path, kind string, into any) {
	t.Helper()
	data, err := os.ReadFile("../../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			t.Fatalf("no %s in %s", kind, path)
		} else if err != nil {
			t.Fatal(err)
		}
		if raw["kind"] == kind {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, into); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}
