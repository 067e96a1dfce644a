package kube

import (
	"context"
	"slices"
	"testing"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Compare flags what install would write differently, and not what the
// server or another writer added beside it.
func TestCompare(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "node-local-dns"}
	corefile := func(c string, extra map[string]string) *corev1.ConfigMap {
		data := map[string]string{"Corefile": c}
		for k, v := range extra {
			data[k] = v
		}
		return &corev1.ConfigMap{ObjectMeta: meta, Data: data}
	}
	binding := func(apiGroup string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "yurtdns:node-local-dns"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "yurtdns:node-local-dns"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", APIGroup: apiGroup, Namespace: tunnelnodes.Namespace, Name: "coredns"}}}
	}
	desired := []*unstructured.Unstructured{
		ToUnstructured(corefile(". {\n    kubernetes cluster.local\n}\n", nil), "v1", "ConfigMap"),
		ToUnstructured(binding(""), "rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
	}
	for _, tc := range []struct {
		name    string
		live    []client.Object
		want    []string
		missing int
	}{
		{"as installed", []client.Object{corefile(". {\n    kubernetes cluster.local\n}\n", nil), binding("")}, nil, 0},
		{"filled in beside ours", []client.Object{corefile(". {\n    kubernetes cluster.local\n}\n", map[string]string{"other": "x"}), binding("")}, nil, 0},
		{"an earlier version's Corefile", []client.Object{corefile(". {\n    forward . 10.96.0.10\n}\n", nil), binding("")}, []string{"ConfigMap kube-system/node-local-dns"}, 0},
		{"another subject", []client.Object{corefile(". {\n    kubernetes cluster.local\n}\n", nil), func() client.Object {
			b := binding("")
			b.Subjects[0].Name = "raven-proxy-dns"
			return b
		}()}, []string{"ClusterRoleBinding yurtdns:node-local-dns"}, 0},
		{"missing is not outdated", nil, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(tc.live...).Build()}
			missing, got, err := Compare(context.Background(), env, desired)
			if err != nil || !slices.Equal(got, tc.want) || len(missing) != tc.missing {
				t.Errorf("Compare = missing %q, outdated %q, %v; want outdated %q, %d missing", missing, got, err, tc.want, tc.missing)
			}
		})
	}
}
