// Package deploy holds yurtdns's kustomize manifests and renders them the
// way `kubectl apply -k` does, so `tunnel-nodes-sync install` applies
// exactly what a user applying the directory would.
package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomizations that can be rendered.
const (
	TunnelNodesSync = "tunnel-nodes-sync"
	CoreDNSYurt     = "coredns-yurt"
	// CoreDNSRBAC is the part of CoreDNSYurt that install's rbac step applies.
	CoreDNSRBAC = "coredns-yurt/rbac"
)

// Dirs are every kustomization above, for tests that apply them all.
var Dirs = []string{TunnelNodesSync, CoreDNSYurt}

//go:embed tunnel-nodes-sync coredns-yurt
var manifests embed.FS

// Render builds the kustomization in directory dir (one of the constants).
func Render(dir string) ([]*unstructured.Unstructured, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(manifests, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := manifests.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/", p), data)
	})
	if err != nil {
		return nil, fmt.Errorf("reading embedded %s: %w", dir, err)
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, path.Join("/", dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var objects []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		// Through JSON: YAML maps hold Go ints, which unstructured cannot copy.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objects = append(objects, obj)
	}
	return objects, nil
}
