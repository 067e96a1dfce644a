package deploy

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// tunnelServer is a user's yurt-tunnel-server Deployment for the sidecar
// component; its own container is not yurtdns's.
const tunnelServer = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: yurt-tunnel-server
spec:
  selector:
    matchLabels: {k8s-app: yurt-tunnel-server}
  template:
    metadata:
      labels: {k8s-app: yurt-tunnel-server}
    spec:
      serviceAccountName: yurt-tunnel-server
      containers:
      - name: yurt-tunnel-server
        image: openyurt/yurt-tunnel-server:v1.7.0
`

// TestImagesPinnedToVERSION: every package in deploy/, rendered as
// `kubectl apply -k` renders it, runs yurtdns's images fully qualified at the
// release in the VERSION file, with imagePullPolicy IfNotPresent, so that a
// cluster with `make image`'s archives imported runs them without a registry.
// It reads VERSION, so bumping VERSION without deploy/images fails here.
func TestImagesPinnedToVERSION(t *testing.T) {
	data, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(data))
	want := map[string]bool{"docker.io/yurtdns/coredns-yurt:" + version: true, "docker.io/yurtdns/tunnel-nodes-sync:" + version: true}

	packages := map[string]bool{} // directory → a Component
	err = fs.WalkDir(os.DirFS("."), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "kustomization.yaml" {
			return err
		}
		data, err := os.ReadFile(p)
		packages[path.Dir(p)] = bytes.Contains(data, []byte("\nkind: Component\n"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	containers := 0
	for dir, component := range packages {
		var objs []*unstructured.Unstructured
		switch {
		case !component:
			objs, err = Render(dir)
		case dir == SidecarComponent:
			objs, err = RenderSidecar([]byte(tunnelServer))
		case dir == "images":
			continue // the tags themselves, checked in the packages that include it
		default:
			t.Errorf("component deploy/%s: add it to this test, rendered in a kustomization as a user would", dir)
			continue
		}
		if err != nil {
			t.Errorf("deploy/%s: %v", dir, err)
			continue
		}
		for _, o := range objs {
			for _, field := range []string{"initContainers", "containers"} {
				list, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", field)
				for _, c := range list {
					c := c.(map[string]any)
					if c["name"] == "yurt-tunnel-server" {
						continue // the user's, not ours
					}
					containers++
					if image, _ := c["image"].(string); !want[image] {
						t.Errorf("deploy/%s: %s %s container %s runs %q, want docker.io/yurtdns/NAME:%s (VERSION)", dir, o.GetKind(), o.GetName(), c["name"], image, version)
					}
					if policy := c["imagePullPolicy"]; policy != "IfNotPresent" {
						t.Errorf("deploy/%s: %s %s container %s has imagePullPolicy %v, want IfNotPresent", dir, o.GetKind(), o.GetName(), c["name"], policy)
					}
				}
			}
		}
	}
	if containers == 0 {
		t.Error("no container rendered: the walk found no package")
	}
}
