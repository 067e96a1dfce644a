package kube

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func drainEnv(t *testing.T, objs ...*corev1.Pod) *engine.Env {
	t.Helper()
	grace := kubeProxyGrace
	kubeProxyGrace = 0
	t.Cleanup(func() { kubeProxyGrace = grace })
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: KubeDNSService, Namespace: tunnelnodes.Namespace,
		Annotations: map[string]string{"kubeadm": "kept"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
	b := fake.NewClientBuilder().WithObjects(svc)
	for _, p := range objs {
		b = b.WithObjects(p)
	}
	return &engine.Env{Client: b.Build(), Options: engine.Options{Timeout: 500 * time.Millisecond}}
}

func drainPod(name, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tunnelnodes.Namespace, UID: types.UID("uid-" + name)},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{PodIP: ip}}
}

// The selector a hand-off narrows comes back exactly as it was, also when
// an interrupted run left it narrowed and a drain slice behind.
func TestNarrowedSelectorRestoredExactly(t *testing.T) {
	ctx := context.Background()
	env := drainEnv(t)
	before := &corev1.Service{}
	if err := env.Client.Get(ctx, Key(KubeDNSService), before); err != nil {
		t.Fatal(err)
	}
	if err := (drain{service: KubeDNSService, slice: drainSliceName(KubeDNSService)}).start(ctx, env, []corev1.Pod{*drainPod("old", "10.244.0.2")}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice, as a run interrupted after it and the next one do
		if err := narrowSelector(ctx, env, KubeDNSService, map[string]string{TemplateGenerationLabel: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	narrowed := &corev1.Service{}
	if err := env.Client.Get(ctx, Key(KubeDNSService), narrowed); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"k8s-app": "kube-dns", TemplateGenerationLabel: "1"}; !reflect.DeepEqual(narrowed.Spec.Selector, want) {
		t.Errorf("narrowed selector %v, want %v", narrowed.Spec.Selector, want)
	}
	if got := narrowed.Annotations[narrowedSelectorAnnotation]; got != TemplateGenerationLabel {
		t.Errorf("recorded keys %q, want %q", got, TemplateGenerationLabel)
	}
	if err := EndHandOff(ctx, env, KubeDNSService); err != nil {
		t.Fatal(err)
	}
	after := &corev1.Service{}
	if err := env.Client.Get(ctx, Key(KubeDNSService), after); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after.Spec, before.Spec) || !reflect.DeepEqual(after.Annotations, before.Annotations) {
		t.Errorf("after the hand-off: %v %v; want %v %v", after.Spec.Selector, after.Annotations, before.Spec.Selector, before.Annotations)
	}
	err := env.Client.Get(ctx, Key(drainSliceName(KubeDNSService)), &discoveryv1.EndpointSlice{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("drain slice after the hand-off: %v; want it deleted", err)
	}
}

// A draining pod is listed terminating and serving (kube-proxy keeps its
// conntrack entries and sends it no new flow); the slice goes only once no
// other slice lists the pod.
func TestDrainWaitsUntilNotSelected(t *testing.T) {
	ctx := context.Background()
	old := drainPod("old", "10.244.0.2")
	env := drainEnv(t, old)
	d := drain{service: KubeDNSService, slice: drainSliceName(KubeDNSService)}
	pods := []corev1.Pod{*old}
	if err := d.start(ctx, env, pods); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{}
	if err := env.Client.Get(ctx, Key(d.slice), slice); err != nil {
		t.Fatal(err)
	}
	c := slice.Endpoints[0].Conditions
	if len(slice.Endpoints) != 1 || *c.Ready || !*c.Serving || !*c.Terminating || slice.Endpoints[0].Addresses[0] != "10.244.0.2" {
		t.Errorf("drain slice endpoints %+v; want 10.244.0.2 not ready, serving, terminating", slice.Endpoints)
	}
	if slice.Labels[discoveryv1.LabelServiceName] != KubeDNSService || slice.Labels[discoveryv1.LabelManagedBy] != handoverManagedBy {
		t.Errorf("drain slice labels %v", slice.Labels)
	}

	selected := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-abc", Namespace: tunnelnodes.Namespace,
		Labels: map[string]string{discoveryv1.LabelServiceName: KubeDNSService}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.2"}}}}
	if err := env.Client.Create(ctx, selected); err != nil {
		t.Fatal(err)
	}
	if _, err := d.finish(ctx, env, pods); err == nil || !strings.Contains(err.Error(), "kube-dns-abc still lists 10.244.0.2") {
		t.Errorf("finish while the controller's slice lists the pod: %v; want it to wait and fail", err)
	}
	if err := env.Client.Get(ctx, Key(d.slice), &discoveryv1.EndpointSlice{}); err != nil {
		t.Errorf("drain slice deleted while the pod was still selected: %v", err)
	}

	selected.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}}}
	if err := env.Client.Update(ctx, selected); err != nil {
		t.Fatal(err)
	}
	if _, err := d.finish(ctx, env, pods); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, Key(d.slice), &discoveryv1.EndpointSlice{}); !apierrors.IsNotFound(err) {
		t.Errorf("drain slice after finish: %v; want it deleted", err)
	}
}

// A hand-off runs remove and waits until the leaving pods are gone.
func TestHandOffWaitsForPodsGone(t *testing.T) {
	ctx := context.Background()
	old := drainPod("old", "10.244.0.2")
	env := drainEnv(t, old)
	removed := false
	_, err := HandOff(ctx, env, KubeDNSService, []corev1.Pod{*old}, map[string]string{"keep": "1"}, func() error { removed = true; return nil })
	if !removed || err == nil || !strings.Contains(err.Error(), "not gone") {
		t.Errorf("hand-off with the pod still there: removed %v, %v; want removed and a wait that fails", removed, err)
	}
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := HandOff(ctx, env, KubeDNSService, []corev1.Pod{*old}, map[string]string{"keep": "1"}, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, Key(KubeDNSService), svc); err != nil {
		t.Fatal(err)
	}
	if _, ok := svc.Spec.Selector["keep"]; ok {
		t.Errorf("selector after the hand-off: %v", svc.Spec.Selector)
	}
}

// A leaving pod on a NotReady node (no kubelet confirms its deletion) is
// not waited for.
func TestHandOffSkipsPodsOnNotReadyNodes(t *testing.T) {
	ctx := context.Background()
	old := drainPod("old", "10.244.1.2")
	old.Spec.NodeName = "edge-1"
	env := drainEnv(t, old)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if _, err := HandOff(ctx, env, KubeDNSService, []corev1.Pod{*old}, map[string]string{"keep": "1"}, func() error { return nil }); err != nil {
		t.Errorf("hand-off with the leaving pod on a NotReady node: %v", err)
	}
}
