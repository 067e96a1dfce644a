package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestInstallResumesAfterFailures breaks each step in turn (an object in
// the way, a missing key, an unexpected layout), checks install stops there
// with an error naming the step, repairs the cause and runs install again:
// it must converge, and revert must then restore the originals.
func TestInstallResumesAfterFailures(t *testing.T) {
	t.Parallel()
	k := newKubeadmCluster(t)
	ctx := context.Background()
	cms := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace)
	original := k.snapshot(t)
	stop := k.PlayRolloutControllers(tunnelnodes.Namespace)
	defer stop()

	editConfigMap := func(name, key, value string) (restore func()) {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old, had := cm.Data[key]
		if value == "" {
			delete(cm.Data, key)
		} else {
			cm.Data[key] = value
		}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return func() {
			cm, _ := cms.Get(ctx, name, metav1.GetOptions{})
			if had {
				cm.Data[key] = old
			}
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	failures := []struct {
		step    string
		breakIt func() (repair func())
		wantErr string
	}{
		{"rbac", func() func() {
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "yurtdns:coredns", Namespace: tunnelnodes.Namespace}}
			if _, err := k.Client.RbacV1().Roles(tunnelnodes.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return func() {
				_ = k.Client.RbacV1().Roles(tunnelnodes.Namespace).Delete(ctx, role.Name, metav1.DeleteOptions{})
			}
		}, "already exists and was not created by yurtdns"},
		{"corefile", func() func() { return editConfigMap("coredns", "Corefile", ".:53 {\n forward . /etc/resolv.conf\n}\n") },
			"no kubernetes plugin"},
		// Without kube-dns the DaemonSet's pods are nobody's endpoints: the
		// Deployment must keep serving, so the step before kube-dns-topology stops.
		{"coredns-daemonset", func() func() {
			svc, _ := k.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, "kube-dns", metav1.GetOptions{})
			if err := k.Client.CoreV1().Services(tunnelnodes.Namespace).Delete(ctx, "kube-dns", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			return func() {
				svc.ResourceVersion, svc.UID = "", ""
				if _, err := k.Client.CoreV1().Services(tunnelnodes.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}, "0 of 1 pod IPs are ready endpoints); the coredns Deployment is left as it was"},
		{"kube-proxy", func() func() {
			return editConfigMap("kube-proxy", "config.conf", "kind: KubeProxyConfiguration\nclientConnection: {kubeconfig: /x}\n")
		},
			"unexpected layout"},
		{"control-plane", func() func() {
			path := filepath.Join(k.manifests, "kube-apiserver.yaml")
			good, _ := os.ReadFile(path)
			if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Pod\nspec: {}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := os.WriteFile(path, good, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}, "want exactly one container"},
		{"sync", func() func() {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tunnel-nodes-sync", Namespace: tunnelnodes.Namespace}}
			if _, err := k.Client.CoreV1().ServiceAccounts(tunnelnodes.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return func() {
				_ = k.Client.CoreV1().ServiceAccounts(tunnelnodes.Namespace).Delete(ctx, sa.Name, metav1.DeleteOptions{})
			}
		}, "already exists and was not created by yurtdns"},
	}
	for _, f := range failures {
		repair := f.breakIt()
		out, err := k.run(t, "install")
		if err == nil || !strings.Contains(out, "step "+f.step+":") || !strings.Contains(out, f.wantErr) {
			t.Fatalf("with %s broken: want an error naming the step and %q, got %v:\n%s", f.step, f.wantErr, err, out)
		}
		repair()
	}
	out, err := k.run(t, "install")
	if err != nil {
		t.Fatalf("install after the repairs: %v\n%s", err, out)
	}
	if out, err := k.run(t, "status"); err != nil || !allApplied(out) {
		t.Fatalf("status after converging: %v\n%s", err, out)
	}
	if out, err := k.run(t, "revert"); err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	if changed := diffSnapshots(original, k.snapshot(t)); len(changed) > 0 {
		t.Errorf("revert left %v changed", changed)
	}
}
