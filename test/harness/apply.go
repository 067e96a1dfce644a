package harness

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply server-side-applies objects as the admin, as `kubectl apply
// --server-side` would; with dryRun the apiserver validates and admits them
// but stores nothing.
func (cp *ControlPlane) Apply(t TB, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := []client.ApplyOption{client.FieldOwner("yurtdns-test"), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	for _, o := range objs {
		if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...); err != nil {
			t.Fatalf("applying %s %s/%s (dry run %v): %v", o.GetKind(), o.GetNamespace(), o.GetName(), dryRun, err)
		}
	}
}

// ServiceAccountKubeconfig returns a kubeconfig authenticating as the
// ServiceAccount namespace/name (a client certificate with the user name and
// groups the apiserver gives that ServiceAccount's tokens), so RBAC treats
// the binary exactly as it would treat the pod.
func (cp *ControlPlane) ServiceAccountKubeconfig(t TB, namespace, name string) string {
	t.Helper()
	return cp.KubeconfigFor(t, "system:serviceaccount:"+namespace+":"+name,
		"system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")
}

// CreateFromFile creates every object of a multi-document YAML file (a
// kubeadm-shaped fixture) and returns them as created.
func (cp *ControlPlane) CreateFromFile(t TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var created []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return created
			}
			t.Fatalf("decoding %s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %s %s from %s: %v", obj.GetKind(), obj.GetName(), path, err)
		}
		created = append(created, obj)
	}
}
