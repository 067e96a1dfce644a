package harness

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply server-side-applies objects as the admin, as `kubectl apply
// --server-side` would; with dryRun the apiserver validates and admits them
// but stores nothing.
func (cp *ControlPlane) Apply(t testing.TB, objs []*unstructured.Unstructured, dryRun bool) {
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
func (cp *ControlPlane) ServiceAccountKubeconfig(t testing.TB, namespace, name string) string {
	t.Helper()
	return cp.KubeconfigFor(t, "system:serviceaccount:"+namespace+":"+name,
		"system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")
}
