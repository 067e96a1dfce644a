package deploy

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestRenderRecords: the namespace and its two roles render into it, with
// the bindings to the sync's and the DNS servers' ServiceAccounts, and the
// nodes' binding to the reader (the node-local caches read through yurthub
// as their node).
func TestRenderRecords(t *testing.T) {
	objs, err := Render(Records)
	if err != nil {
		t.Fatal(err)
	}
	if ns := find(objs, "Namespace", "yurtdns-records"); ns == nil {
		t.Fatal("no Namespace yurtdns-records")
	}
	for _, kind := range []string{"Role", "RoleBinding"} {
		for _, name := range []string{"yurtdns:tunnel-nodes-sync", "yurtdns:records-reader"} {
			o := find(objs, kind, name)
			if o == nil {
				t.Fatalf("no %s %s", kind, name)
			}
			if o.GetNamespace() != "yurtdns-records" {
				t.Errorf("%s %s in namespace %q", kind, name, o.GetNamespace())
			}
		}
	}
	nodes := find(objs, "RoleBinding", "yurtdns:records-reader-nodes")
	if nodes == nil || nodes.GetNamespace() != "yurtdns-records" {
		t.Fatalf("no RoleBinding yurtdns:records-reader-nodes in yurtdns-records: %v", nodes)
	}
	if ref, _, _ := unstructured.NestedString(nodes.Object, "roleRef", "name"); ref != "yurtdns:records-reader" {
		t.Errorf("the nodes are bound to %q, want the reader", ref)
	}
	if len(objs) != 6 {
		t.Errorf("%d objects, want 6", len(objs))
	}
}
