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
	// TunnelNodesSyncRaven is TunnelNodesSync with --profile raven and
	// roles naming Raven's objects.
	TunnelNodesSyncRaven = "raven/tunnel-nodes-sync"
	// Records is the shards' namespace and who may read and write them.
	Records = "records"
	// RavenProxyDNSRBAC lets raven-proxy-dns, once it runs coredns-yurt,
	// read the records ConfigMap and the proxy Service.
	RavenProxyDNSRBAC = "raven/proxy-dns-rbac"
	// NodeLocalDNS is coredns-yurt as a node-local cache on every node.
	NodeLocalDNS = "node-local-dns"
	// NodeLocalDNSLeftover is the forwarder revert leaves on 169.254.20.10
	// for pods still resolving there.
	NodeLocalDNSLeftover = "node-local-dns-leftover"
	// Monitoring is the PodMonitors and alerts of prometheus-operator.
	Monitoring = "monitoring"
	// MonitoringRaven is Monitoring with coredns-yurt in raven-proxy-dns's pods.
	MonitoringRaven = "raven/monitoring"
	// MonitoringSidecar is Monitoring with the sync in yurt-tunnel-server's
	// pods (SidecarComponent).
	MonitoringSidecar = "tunnel-nodes-sync/sidecar/monitoring"
)

// Dirs are every workload's kustomization above, for tests that apply
// them all (the RBAC-only ones are parts of them, or applied by install).
var Dirs = []string{TunnelNodesSync, CoreDNSYurt, TunnelNodesSyncRaven, NodeLocalDNS, NodeLocalDNSLeftover}

//go:embed tunnel-nodes-sync coredns-yurt raven records node-local-dns node-local-dns-leftover monitoring images
var manifests embed.FS

// Render builds the kustomization in directory dir (one of the constants).
func Render(dir string) ([]*unstructured.Unstructured, error) {
	mem, err := embeddedFS()
	if err != nil {
		return nil, err
	}
	return run(mem, dir)
}

// SidecarComponent is the kustomize component that runs the sync inside
// yurt-tunnel-server's pod.
const SidecarComponent = "tunnel-nodes-sync/sidecar"

// RenderSidecar renders a kustomization of the given yurt-tunnel-server
// Deployment (YAML) with SidecarComponent added, as a user's own
// kustomization would include it (tests check the sidecar this way).
func RenderSidecar(tunnelServerDeployment []byte) ([]*unstructured.Unstructured, error) {
	mem, err := embeddedFS()
	if err != nil {
		return nil, err
	}
	const dir = "user"
	files := map[string][]byte{
		"kustomization.yaml": []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: kube-system\n" +
			"resources:\n- tunnel-server.yaml\ncomponents:\n- ../" + SidecarComponent + "\n"),
		"tunnel-server.yaml": tunnelServerDeployment,
	}
	for name, data := range files {
		if err := mem.WriteFile(path.Join("/", dir, name), data); err != nil {
			return nil, err
		}
	}
	return run(mem, dir)
}

// embeddedFS copies the embedded manifests into an in-memory file system.
func embeddedFS() (filesys.FileSystem, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(manifests, ".", func(p string, d fs.DirEntry, err error) error {
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
		return nil, fmt.Errorf("reading embedded manifests: %w", err)
	}
	return mem, nil
}

// run builds the kustomization in dir of mem.
func run(mem filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
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
