package tunnelsync

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// yurtTunnelReconciler is the sync with yurt-tunnel's names, reading and
// writing through c, without port sync, with the nodes c has.
func yurtTunnelReconciler(t testing.TB, c client.Client) *Reconciler {
	return &Reconciler{
		cfg: Config{Namespace: tunnelnodes.Namespace, ConfigMap: tunnelnodes.ConfigMapName, ConfigMapKey: tunnelnodes.ConfigMapKey,
			Service: tunnelnodes.ServiceName, Layout: yurtTunnelLayout(t), EdgeNodeSelector: labels.SelectorFromSet(labels.Set{tunnelnodes.EdgeNodeLabel: "true"})},
		client: c, apiReader: c, nodes: nodesOf(t, c),
	}
}

// yurtTunnelLayout is the yurt-tunnel layout.
func yurtTunnelLayout(t testing.TB) layout.Layout {
	t.Helper()
	l, err := layout.Named(layout.YurtTunnel)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// nodesOf is a node store that listed the nodes c has.
func nodesOf(t testing.TB, c client.Client) *nodeStore {
	t.Helper()
	var nodes corev1.NodeList
	if err := c.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	return storeOf(t, nodes.Items)
}

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
	r := yurtTunnelReconciler(t, c)
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

// reconcileFixture is a cluster in controller-runtime's fake client: an
// edge and a cloud node, the tunnel Service with a port of its own, and a
// server config asking for one extra port; the Reconciler reads and writes
// through it, its cache and API reader alike unless a test says otherwise.
type reconcileFixture struct {
	ctx    context.Context
	client client.Client
	r      *Reconciler
}

const (
	wantRecords = "10.96.0.9\tedge-1\n192.168.0.10\tcloud-1" // sorted as strings
	tunnelIP    = "10.96.0.9"
)

func newReconcileFixture(t *testing.T, funcs *interceptor.Funcs) *reconcileFixture {
	t.Helper()
	ns := tunnelnodes.Namespace
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tunnelnodes.ServiceName},
		Spec: corev1.ServiceSpec{ClusterIP: tunnelIP, ClusterIPs: []string{tunnelIP},
			Ports: []corev1.ServicePort{{Name: "https", Port: 10250, TargetPort: intstr.FromInt32(10263), Protocol: corev1.ProtocolTCP}}}}
	serverCfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tunnelnodes.ServerConfigName},
		Data: map[string]string{tunnelnodes.HTTPSProxyPortsKey: "9100"}}
	edge, cloud := node("edge-1", true, internal("192.168.0.21")), node("cloud-1", false, internal("192.168.0.10"))
	b := fake.NewClientBuilder().WithObjects(svc, serverCfg, &edge, &cloud)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	c := b.Build()
	return &reconcileFixture{ctx: context.Background(), client: c, r: &Reconciler{
		cfg: Config{Namespace: ns, ConfigMap: tunnelnodes.ConfigMapName, ConfigMapKey: tunnelnodes.ConfigMapKey,
			Service: tunnelnodes.ServiceName, ServerConfig: tunnelnodes.ServerConfigName, Layout: yurtTunnelLayout(t),
			EdgeNodeSelector: labels.SelectorFromSet(labels.Set{tunnelnodes.EdgeNodeLabel: "true"}),
			HTTPSTargetPort:  10263, HTTPTargetPort: 10264},
		client: c, apiReader: c, serverConfig: c, recorder: events.NewFakeRecorder(10), nodes: nodesOf(t, c),
	}}
}

func (f *reconcileFixture) reconcile(t *testing.T) {
	t.Helper()
	if _, err := f.r.Reconcile(f.ctx, syncRequest); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
}

// objects reads the records ConfigMap and the tunnel Service.
func (f *reconcileFixture) objects(t *testing.T) (*corev1.ConfigMap, *corev1.Service) {
	t.Helper()
	cm, svc := &corev1.ConfigMap{}, &corev1.Service{}
	if err := f.client.Get(f.ctx, types.NamespacedName{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ConfigMapName}, cm); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Get(f.ctx, types.NamespacedName{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName}, svc); err != nil {
		t.Fatal(err)
	}
	return cm, svc
}

func portNames(svc *corev1.Service) []string {
	var names []string
	for _, p := range svc.Spec.Ports {
		names = append(names, fmt.Sprintf("%s:%d->%s", p.Name, p.Port, p.TargetPort.String()))
	}
	return names
}

// Reconcile brings the records ConfigMap and the Service's dnat-* ports to
// the desired state, and a second Reconcile with nothing changed writes
// nothing.
func TestReconcileDesiredStateThenNoOp(t *testing.T) {
	f := newReconcileFixture(t, nil)
	writes := func() float64 {
		return testutil.ToFloat64(writesTotal.WithLabelValues("configmap")) + testutil.ToFloat64(writesTotal.WithLabelValues("service"))
	}
	before := writes()
	f.reconcile(t)
	cm, svc := f.objects(t)
	if cm.Data[tunnelnodes.ConfigMapKey] != wantRecords || cm.Annotations[tunnelnodes.TunnelClusterIPsAnnotation] != tunnelIP ||
		cm.Annotations[tunnelnodes.LastChangeTriggerTimeAnnotation] == "" {
		t.Errorf("records ConfigMap: data %q annotations %v", cm.Data, cm.Annotations)
	}
	if got, want := portNames(svc), []string{"https:10250->10263", "dnat-9100:9100->10263"}; !slices.Equal(got, want) {
		t.Errorf("Service ports %v, want %v", got, want)
	}
	if got := writes() - before; got != 2 {
		t.Errorf("%v writes, want 2 (the ConfigMap created, the Service updated)", got)
	}

	before = writes()
	f.reconcile(t)
	cm2, svc2 := f.objects(t)
	if cm2.ResourceVersion != cm.ResourceVersion || svc2.ResourceVersion != svc.ResourceVersion || writes() != before {
		t.Errorf("nothing changed, but Reconcile wrote: ConfigMap %s -> %s, Service %s -> %s, %v writes",
			cm.ResourceVersion, cm2.ResourceVersion, svc.ResourceVersion, svc2.ResourceVersion, writes()-before)
	}
}

// A write that conflicts (someone else wrote the object since it was read)
// is never forced: the object is read again, the other writer's change is
// kept, the desired state is applied on top, and the conflict is counted.
func TestReconcileRetriesConflicts(t *testing.T) {
	for _, tc := range []struct {
		what string
		obj  client.Object
	}{{"configmap", &corev1.ConfigMap{}}, {"service", &corev1.Service{}}} {
		t.Run(tc.what, func(t *testing.T) {
			raced := false
			// Before the first update of the object lands, another writer
			// changes it: the update carries a stale resourceVersion.
			funcs := &interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if reflect.TypeOf(obj) == reflect.TypeOf(tc.obj) && !raced {
					raced = true
					other := tc.obj.DeepCopyObject().(client.Object)
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil {
						return err
					}
					other.SetLabels(map[string]string{"other-writer": "kept"})
					if err := c.Update(ctx, other); err != nil {
						return err
					}
				}
				return c.Update(ctx, obj, opts...)
			}}
			f := newReconcileFixture(t, funcs)
			if tc.what == "configmap" { // it must exist to be updated
				stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ConfigMapName},
					Data: map[string]string{tunnelnodes.ConfigMapKey: "10.96.0.1\tedge-1"}}
				if err := f.client.Create(f.ctx, stale); err != nil {
					t.Fatal(err)
				}
			}
			conflicts := testutil.ToFloat64(conflictsTotal.WithLabelValues(tc.what))
			f.reconcile(t)
			if !raced {
				t.Fatal("no update of the object was made")
			}
			cm, svc := f.objects(t)
			var written client.Object = svc
			if tc.what == "configmap" {
				written = cm
			}
			if written.GetLabels()["other-writer"] != "kept" {
				t.Errorf("the other writer's change was overwritten: labels %v", written.GetLabels())
			}
			if cm.Data[tunnelnodes.ConfigMapKey] != wantRecords || len(svc.Spec.Ports) != 2 {
				t.Errorf("desired state not applied after the conflict: records %q, ports %v", cm.Data[tunnelnodes.ConfigMapKey], portNames(svc))
			}
			if got := testutil.ToFloat64(conflictsTotal.WithLabelValues(tc.what)) - conflicts; got != 1 {
				t.Errorf("%v conflicts counted, want 1", got)
			}
		})
	}
}

// TestOwnWriteEchoIsNoChange: the watch event of the sync's own write of the
// records ConfigMap neither starts a sync nor the trigger clock, while another
// writer's later change of the same object, and a deletion, do.
func TestOwnWriteEchoIsNoChange(t *testing.T) {
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.9", ClusterIPs: []string{"10.96.0.9"}},
	}
	cloud := node("cloud-1", false, internal("192.168.0.21"))
	c := fake.NewClientBuilder().WithObjects(svc, &cloud).Build()
	r := yurtTunnelReconciler(t, c)
	if _, err := r.Reconcile(ctx, syncRequest); err != nil {
		t.Fatal(err)
	}
	written := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ConfigMapName}, written); err != nil {
		t.Fatal(err)
	}
	passes := notOwnWrite[*corev1.ConfigMap](&r.own)
	if passes.Create(event.TypedCreateEvent[*corev1.ConfigMap]{Object: written}) {
		t.Error("the echo of the sync's own create passed")
	}
	edited := written.DeepCopy()
	edited.Data[tunnelnodes.ConfigMapKey] = "192.168.0.99\tcloud-1"
	if err := c.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	if !passes.Update(event.TypedUpdateEvent[*corev1.ConfigMap]{ObjectOld: written, ObjectNew: edited}) {
		t.Error("another writer's edit was taken for the sync's own write")
	}
	if !passes.Delete(event.TypedDeleteEvent[*corev1.ConfigMap]{Object: written}) {
		t.Error("a deletion of the records was dropped")
	}
	if _, err := r.Reconcile(ctx, syncRequest); err != nil {
		t.Fatal(err)
	}
	repaired := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(written), repaired); err != nil {
		t.Fatal(err)
	}
	if passes.Update(event.TypedUpdateEvent[*corev1.ConfigMap]{ObjectOld: edited, ObjectNew: repaired}) {
		t.Error("the echo of the sync's repair passed")
	}
}
