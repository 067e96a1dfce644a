package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestTargetPort(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
		{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", ContainerPort: 5353, Protocol: corev1.ProtocolTCP}}}}}}
	for _, tc := range []struct {
		name string
		sp   corev1.ServicePort
		want int32
		err  string
	}{
		{"unset: the Service port", corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, 53, ""},
		{"a number", corev1.ServicePort{Name: "metrics", Port: 9153, TargetPort: intstr.FromInt32(9253)}, 9253, ""},
		{"a name, matched with its protocol", corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("dns-tcp")}, 5353, ""},
		{"a name no container has", corev1.ServicePort{Name: "x", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("nope")}, 0, `no container port named "nope"`},
	} {
		got, err := targetPort(tc.sp, pod)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %d, %v; want %d, %q", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// handoverEnv is a fake cluster with raven-proxy-dns's Deployment and Service.
func handoverEnv(t *testing.T) *engine.Env {
	t.Helper()
	grace := kubeProxyGrace
	kubeProxyGrace = 0
	t.Cleanup(func() { kubeProxyGrace = grace })
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.RavenProxyDNSName, Namespace: tunnelnodes.Namespace, UID: "d-uid"}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.RavenProxyDNSName, Namespace: tunnelnodes.Namespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}}}}
	return &engine.Env{Client: fake.NewClientBuilder().WithObjects(d, svc).WithStatusSubresource(&corev1.Pod{}).Build(), Options: engine.Options{Timeout: time.Second}}
}

func handoverTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": tunnelnodes.RavenProxyDNSName}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{tunnelnodes.EdgeNodeLabel: "false"},
			Affinity:     &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}},
			Containers:   []corev1.Container{{Name: "coredns", Image: "coredns-yurt:test"}},
		},
	}
}

// The handover pod is the template without the Deployment's labels or
// anti-affinity; once Ready it stands behind the Service in an
// EndpointSlice of its own, and end removes both.
func TestHandover(t *testing.T) {
	ctx := context.Background()
	env := handoverEnv(t)
	h := Handover{Service: tunnelnodes.RavenProxyDNSName, Deployment: tunnelnodes.RavenProxyDNSName}
	// The kubelet's part: the pod runs and is Ready once created.
	go func() {
		for range 100 {
			pod := &corev1.Pod{}
			if env.Client.Get(ctx, Key(h.name()), pod) == nil {
				pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.9",
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
				if env.Client.Status().Update(ctx, pod) == nil {
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if err := h.Begin(ctx, env, handoverTemplate()); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, Key(h.name()), pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels["k8s-app"] != "" || pod.Spec.Affinity != nil || pod.Spec.NodeSelector[tunnelnodes.EdgeNodeLabel] != "false" ||
		len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != "d-uid" {
		t.Errorf("handover pod: %+v %+v", pod.ObjectMeta, pod.Spec)
	}
	slice := &discoveryv1.EndpointSlice{}
	if err := env.Client.Get(ctx, Key(h.name()), slice); err != nil {
		t.Fatal(err)
	}
	if slice.Labels[discoveryv1.LabelServiceName] != tunnelnodes.RavenProxyDNSName || slice.Labels[discoveryv1.LabelManagedBy] != handoverManagedBy ||
		slice.AddressType != discoveryv1.AddressTypeIPv4 || len(slice.Endpoints) != 1 || slice.Endpoints[0].Addresses[0] != "10.244.0.9" ||
		len(slice.Ports) != 2 || *slice.Ports[0].Name != "dns" || *slice.Ports[0].Port != 53 || *slice.Ports[1].Protocol != corev1.ProtocolTCP {
		t.Errorf("handover EndpointSlice: %+v", slice)
	}
	if err := h.Begin(ctx, env, handoverTemplate()); err != nil { // again: the running pod is reused
		t.Fatalf("second begin: %v", err)
	}
	if _, err := h.End(ctx, env); err != nil {
		t.Fatal(err)
	}
	for _, o := range []error{env.Client.Get(ctx, Key(h.name()), &corev1.Pod{}), env.Client.Get(ctx, Key(h.name()), &discoveryv1.EndpointSlice{})} {
		if !apierrors.IsNotFound(o) {
			t.Errorf("after end: %v", o)
		}
	}
	if _, err := h.End(ctx, env); err != nil {
		t.Errorf("end without a handover: %v", err)
	}
}

// A handover pod that never gets Ready stops the step with its phase,
// before anything is put behind the Service.
func TestHandoverPodNotReady(t *testing.T) {
	ctx := context.Background()
	env := handoverEnv(t)
	h := Handover{Service: tunnelnodes.RavenProxyDNSName, Deployment: tunnelnodes.RavenProxyDNSName}
	err := h.Begin(ctx, env, handoverTemplate())
	if err == nil || !strings.Contains(err.Error(), "handover pod raven-proxy-dns-handover not Ready after 1s") {
		t.Fatalf("begin: %v", err)
	}
	if err := env.Client.Get(ctx, Key(h.name()), &discoveryv1.EndpointSlice{}); !apierrors.IsNotFound(err) {
		t.Errorf("an EndpointSlice for a pod that is not Ready: %v", err)
	}
}
