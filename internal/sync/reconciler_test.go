package sync

import (
	"context"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestReconcileAnnotatesTunnelClusterIPs: every write of the records
// ConfigMap names the tunnel ClusterIPs its text was rendered for (both
// families of a dual-stack Service), and a stored text without that
// annotation, or with another one, is written again even though the text is
// unchanged.
func TestReconcileAnnotatesTunnelClusterIPs(t *testing.T) {
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.9", ClusterIPs: []string{"10.96.0.9", "fd00:10:96::9"}},
	}
	edge := node("edge-1", true, internal("192.168.0.21"))
	c := fake.NewClientBuilder().WithObjects(svc, &edge).Build()
	r := &Reconciler{
		cfg: Config{Namespace: tunnelnodes.Namespace, ConfigMap: tunnelnodes.ConfigMapName, ConfigMapKey: tunnelnodes.ConfigMapKey,
			Service: tunnelnodes.ServiceName, EdgeNodeSelector: labels.SelectorFromSet(labels.Set{tunnelnodes.EdgeNodeLabel: "true"})},
		client: c, apiReader: c, log: logr.Discard(),
	}
	key := types.NamespacedName{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ConfigMapName}
	get := func() *corev1.ConfigMap {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	reconcile := func() *corev1.ConfigMap {
		t.Helper()
		if _, err := r.Reconcile(ctx, syncRequest); err != nil {
			t.Fatal(err)
		}
		return get()
	}

	created := reconcile()
	if created.Data[tunnelnodes.ConfigMapKey] != "10.96.0.9\tedge-1" ||
		created.Annotations[tunnelnodes.TunnelClusterIPsAnnotation] != "10.96.0.9,fd00:10:96::9" {
		t.Fatalf("created: data %q annotations %v", created.Data, created.Annotations)
	}
	if again := reconcile(); again.ResourceVersion != created.ResourceVersion {
		t.Errorf("nothing changed, but the ConfigMap was written (resourceVersion %s -> %s)", created.ResourceVersion, again.ResourceVersion)
	}

	// Records as upstream's controller writes them: same text, no annotation.
	upstream := get()
	delete(upstream.Annotations, tunnelnodes.TunnelClusterIPsAnnotation)
	upstream.Annotations["note"] = "keep"
	if err := c.Update(ctx, upstream); err != nil {
		t.Fatal(err)
	}
	fixed := reconcile()
	if fixed.ResourceVersion == upstream.ResourceVersion ||
		fixed.Annotations[tunnelnodes.TunnelClusterIPsAnnotation] != "10.96.0.9,fd00:10:96::9" || fixed.Annotations["note"] != "keep" {
		t.Errorf("annotation not restored (or others lost): %v", fixed.Annotations)
	}

	// The Service loses its IPv6 family: the text stays, the annotation follows.
	svc.Spec.ClusterIPs = []string{"10.96.0.9"}
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	single := reconcile()
	if single.Data[tunnelnodes.ConfigMapKey] != "10.96.0.9\tedge-1" || single.Annotations[tunnelnodes.TunnelClusterIPsAnnotation] != "10.96.0.9" {
		t.Errorf("after the IPv6 family went: data %q annotations %v", single.Data, single.Annotations)
	}
}
