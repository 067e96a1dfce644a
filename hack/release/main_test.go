package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// TestRelease: every image in the release's manifests is yurtdns's at the
// release's version, fully qualified, and nothing is left at :latest.
func TestRelease(t *testing.T) {
	const version = "v0.1.0"
	dir := t.TempDir()
	if err := write(dir, version); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, repo := range repositories {
		want[repo+":"+version] = false
	}
	for _, k := range kustomizations {
		data, err := os.ReadFile(filepath.Join(dir, manifestFile(k)))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(":latest")) {
			t.Errorf("%s: :latest is left", manifestFile(k))
		}
		objects := 0
		// As kubectl apply -f reads the file: YAML documents, empty ones skipped.
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", manifestFile(k), err)
			}
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", manifestFile(k), err)
			}
			if obj == nil {
				continue
			}
			objects++
			for _, image := range images(obj) {
				if _, ok := want[image]; !ok {
					t.Errorf("%s: %s %s runs image %q, want one of %v", manifestFile(k), obj["kind"], obj["metadata"].(map[string]any)["name"], image, want)
				}
				want[image] = true
			}
		}
		if objects == 0 {
			t.Errorf("%s has no objects", manifestFile(k))
		}
	}
	for image, seen := range want {
		if !seen {
			t.Errorf("no manifest runs %s", image)
		}
	}
}

// images are the values of every "image" field anywhere in v.
func images(v any) []string {
	var found []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "image" {
				found = append(found, s)
			}
			found = append(found, images(e)...)
		}
	case []any:
		for _, e := range v {
			found = append(found, images(e)...)
		}
	}
	return found
}

// TestEveryKustomization: a release has each kustomization under deploy/
// that is not part of another (its parent directory's), so that one added
// there is not left out of releases.
func TestEveryKustomization(t *testing.T) {
	var all []string
	err := filepath.WalkDir("../../deploy", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "kustomization.yaml" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte("\nkind: Kustomization\n")) {
			return err // components are for a user's own kustomization
		}
		dir, _ := filepath.Rel("../../deploy", filepath.Dir(p))
		all = append(all, filepath.ToSlash(dir))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range all {
		if slices.Contains(all, path.Dir(dir)) {
			continue
		}
		if !slices.Contains(kustomizations, dir) {
			t.Errorf("deploy/%s is not in a release (hack/release's kustomizations)", dir)
		}
	}
}

func TestRefusesNonRelease(t *testing.T) {
	for _, v := range []string{"", "dev", "5fa42d7", "0.1.0", "v0.1", "v0.1.0+build.1"} {
		if err := write(t.TempDir(), v); err == nil {
			t.Errorf("version %q: no error", v)
		}
	}
}
