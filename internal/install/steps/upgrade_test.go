package steps

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/nodelocal"
)

// memoryValue is a FieldEdit's value held in memory: the edits' logic
// without an apiserver.
func memoryValue(edit kube.FieldEdit, value *string) kube.FieldEdit {
	edit.Get = func(context.Context, *engine.Env) (string, bool, error) { return *value, true, nil }
	edit.Set = func(_ context.Context, _ *engine.Env, v string, _ bool) error { *value = v; return nil }
	return edit
}

// kubeletConfig is kubelet-config's "kubelet" as kubeadm writes it, at version.
func kubeletConfig(version string) string {
	return "apiVersion: kubelet.config.k8s.io/v1beta1\nclusterDNS:\n- 10.96.0.10\nclusterDomain: cluster.local\n" +
		"kind: KubeletConfiguration\n# " + version + "\n"
}

// kubeadm upgrade re-marshals kubelet-config and kubeadm-config: revert must
// still take out install's values, and only those, never put back the text
// of the version before.
func TestRevertAfterKubeadmReMarshals(t *testing.T) {
	ctx := context.Background()
	clusterConfig := "apiServer: {}\napiVersion: kubeadm.k8s.io/v1beta4\ncontrollerManager: {}\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\n"
	upgrade := func(s string) string { return strings.Replace(s, "v1.36.3", "v1.37.1", 1) }
	for _, tc := range []struct {
		name   string
		edit   kube.FieldEdit
		before string
		check  func(t *testing.T, reverted string)
	}{
		{"kubelet-config", kube.FieldEdit{Key: "kubelet-config", Desired: func(_ *engine.Env, cur string, _ bool) (string, error) {
			next, _, err := nodelocal.SetClusterDNS([]byte(cur), []string{nodelocal.Address.String()})
			return string(next), err
		}, Undo: kubeletConfigUndo}, kubeletConfig("v1.36.3"), func(t *testing.T, reverted string) {
			cfg, err := nodelocal.ParseKubeletConfig([]byte(reverted))
			if err != nil || !slices.Equal(cfg.ClusterDNS, []string{"10.96.0.10"}) || !strings.Contains(reverted, "v1.37.1") {
				t.Errorf("after revert (%v):\n%s", err, reverted)
			}
		}},
		{"kubeadm-config", kubeadmConfigEdit(false), clusterConfig, func(t *testing.T, reverted string) {
			if want := upgrade(clusterConfig); reverted != want {
				t.Errorf("after revert:\n%s\nwant\n%s", reverted, want)
			}
		}},
		// OpenYurt v1.6 or later: kube-controller-manager left alone, one flag only.
		{"kubeadm-config, node lifecycle kept", kubeadmConfigEdit(true), clusterConfig, func(t *testing.T, reverted string) {
			if want := upgrade(clusterConfig); reverted != want {
				t.Errorf("after revert:\n%s\nwant\n%s", reverted, want)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			value := tc.before
			edit := memoryValue(tc.edit, &value)
			ss, env := newStepState(), &engine.Env{}
			if changed, _, err := edit.Install(ctx, env, ss); err != nil || !changed {
				t.Fatalf("install: %v %v", changed, err)
			}
			installed := value
			if value = upgrade(value); value == installed {
				t.Fatal("the upgrade changed nothing")
			}
			if outcome, _, err := edit.Revert(ctx, env, ss); err != nil || outcome != kube.Restored {
				t.Fatalf("revert: %v %v", outcome, err)
			}
			tc.check(t, value)
		})
	}
}
