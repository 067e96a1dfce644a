package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestDeployManifestsDryRun: every kustomization under deploy/ is accepted
// by the apiserver (server-side apply, dry run: validation and admission).
func TestDeployManifestsDryRun(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	for _, dir := range deploy.Dirs {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		cp.Apply(t, objs, true)
	}
}

// TestDeployManifestsAndSyncRBAC applies deploy/tunnel-nodes-sync (the
// Deployment with a server-side dry run: envtest runs no pods), then runs
// the real sync binary as its ServiceAccount: it must do its whole job with
// those permissions and nothing more.
func TestDeployManifestsAndSyncRBAC(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	objs, err := deploy.Render(deploy.TunnelNodesSync)
	if err != nil {
		t.Fatal(err)
	}
	var rbac []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "Deployment" { // the Deployment only dry-run: envtest runs no pods
			rbac = append(rbac, o)
		}
	}
	cp.Apply(t, objs, true)
	cp.Apply(t, rbac, false)

	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.ApplyConfigMap(t, harness.ServerConfig(map[string]string{tunnelnodes.HTTPSProxyPortsKey: "9100"}))
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "192.168.0.10"})

	saKubeconfig := cp.ServiceAccountKubeconfig(t, tunnelnodes.Namespace, "tunnel-nodes-sync")
	harness.StartSync(t, saKubeconfig) // with leader election, as deployed
	expectRecords(t, cp, "10.96.0.9\tworker-1", "192.168.0.10\tmaster-1")
	harness.Eventually(t, 2*time.Second, func() error {
		s, err := cp.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n := len(s.Spec.Ports); n != 3 {
			return fmt.Errorf("service has %d ports, want 3 (https, http, dnat-9100)", n)
		}
		return nil
	})

	// The same identity is refused everything else.
	cfg, err := clientcmd.BuildConfigFromFlags("", saKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	sa := kubernetes.NewForConfigOrDie(cfg)
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "coredns"}}
	cp.ApplyConfigMap(t, other)
	denied := map[string]error{}
	_, denied["get another configmap"] = sa.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{})
	_, denied["update another configmap"] = sa.CoreV1().ConfigMaps(tunnelnodes.Namespace).Update(ctx, other, metav1.UpdateOptions{})
	_, denied["list all configmaps"] = sa.CoreV1().ConfigMaps(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{})
	_, denied["update the server config"] = sa.CoreV1().ConfigMaps(tunnelnodes.Namespace).Update(ctx, harness.ServerConfig(nil), metav1.UpdateOptions{})
	_, denied["read a secret"] = sa.CoreV1().Secrets(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{})
	_, denied["get another service"] = sa.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	node, _ := cp.Client.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
	_, denied["update a node"] = sa.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	for what, err := range denied {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: want Forbidden, got %v", what, err)
		}
	}
}
