package steps

import (
	"slices"
	"testing"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSyncObjectsKubeDNSTopology: the sync install deploys keeps the
// annotation the kube-dns-topology step sets, with the step's value, unless
// that step is skipped; Raven's sync never does; --sync-image applies either way.
func TestSyncObjectsKubeDNSTopology(t *testing.T) {
	keep := kubeDNSTopologyArg + topologyValue
	for _, tc := range []struct {
		name, dir string
		skip      []string
		want      bool
	}{
		{"yurt-tunnel", deploy.TunnelNodesSync, nil, true},
		{"yurt-tunnel, other steps skipped", deploy.TunnelNodesSync, []string{"kube-proxy", "prometheus"}, true},
		{"yurt-tunnel, kube-dns-topology skipped", deploy.TunnelNodesSync, []string{"kube-proxy", kubeDNSTopologyStepName}, false},
		{"raven", deploy.TunnelNodesSyncRaven, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &engine.Env{Options: engine.Options{Skip: tc.skip, SyncImage: "tunnel-nodes-sync:test"}}
			objs, err := syncObjects(env, tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" })
			containers, _, _ := unstructured.NestedSlice(objs[i].Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			if got := slices.Contains(args, keep); got != tc.want {
				t.Errorf("args %q: %s there %v, want %v", args, keep, got, tc.want)
			}
			if !slices.Contains(args, "--leader-elect=true") || args[0] != "run" {
				t.Errorf("args %q lost the others", args)
			}
			if c["image"] != "tunnel-nodes-sync:test" {
				t.Errorf("image %v", c["image"])
			}
		})
	}
}
