package kube

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The DaemonSet wait counts Ready nodes its nodeSelector matches, each
// needing a Ready pod of the current template generation; NotReady nodes
// are skipped and named.
func TestDaemonSetOnReadyNodes(t *testing.T) {
	ctx := context.Background()
	linux := map[string]string{"kubernetes.io/os": "linux"}
	node := func(name string, ready bool, labels map[string]string) *corev1.Node {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "proxy", UID: "ds-1",
		Annotations: map[string]string{TemplateGenerationAnnotation: "2"}},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "proxy"}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: linux}}}}
	pod := func(node, gen string, ready bool, ip string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "proxy-" + node,
			Labels:          map[string]string{"app": "proxy", TemplateGenerationLabel: gen},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "proxy", UID: ds.UID, Controller: new(true)}}},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	old := pod("ready-1", "1", true, "10.244.0.2")
	c := fake.NewClientBuilder().WithObjects(ds,
		node("ready-1", true, linux), node("edge-1", false, linux), node("windows-1", true, nil),
		old, pod("edge-1", "2", false, "")).Build()
	env := &engine.Env{Client: c, Options: engine.Options{Timeout: 300 * time.Millisecond}}

	var notReady, ips []string
	err := kubewait.For(ctx, env.Options.Timeout, "DaemonSet proxy not ready", DaemonSetOnReadyNodes(env, "proxy", &notReady, &ips))
	if err == nil || !strings.Contains(err.Error(), "0 of 1 Ready nodes run a Ready pod of the current template and none of an older one; waiting on ready-1") {
		t.Errorf("with the old pod on ready-1: %v", err)
	}
	// The surge pod Ready beside the old one: not done until the old one goes.
	surge := pod("ready-1", "2", true, "10.244.0.3")
	surge.Name = "proxy-ready-1-surge"
	if err := c.Create(ctx, surge); err != nil {
		t.Fatal(err)
	}
	err = kubewait.For(ctx, env.Options.Timeout, "DaemonSet proxy not ready", DaemonSetOnReadyNodes(env, "proxy", &notReady, &ips))
	if err == nil || !strings.Contains(err.Error(), "waiting on ready-1") {
		t.Errorf("with the surge pod Ready beside the old one on ready-1: %v", err)
	}
	if err := c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	err = kubewait.For(ctx, env.Options.Timeout, "DaemonSet proxy not ready", DaemonSetOnReadyNodes(env, "proxy", &notReady, &ips))
	if err != nil || !slices.Equal(notReady, []string{"edge-1"}) || !slices.Equal(ips, []string{"10.244.0.3"}) {
		t.Errorf("rolled out on the Ready node: %v, NotReady %v, IPs %v; want done, edge-1 named, the new pod's IP", err, notReady, ips)
	}
}
