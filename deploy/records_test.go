package deploy

import "testing"

// TestRenderRecords: the namespace and its two roles render into it, with
// the bindings to the sync's and the DNS servers' ServiceAccounts.
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
	if len(objs) != 5 {
		t.Errorf("%d objects, want 5", len(objs))
	}
}
