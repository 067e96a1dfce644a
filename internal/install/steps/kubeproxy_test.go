package steps

import (
	"context"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubeproxyconf"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The kube-proxy step edits only where yurthub serves the in-cluster config
// on every node, and not when the line is already commented out or empty.
func TestKubeProxySkipReason(t *testing.T) {
	ctx := context.Background()
	var cm corev1.ConfigMap
	kubeadmObject(t, "kube-proxy.yaml", "ConfigMap", &cm)
	conf := cm.Data["config.conf"]
	nodes := []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-1"}},
		// yurtadm join v1.7 put it in a pool and runs yurthub as a service.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{nodePoolLabel: "edge"}}},
	}
	yurthub := func(name, node string) client.Object {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	commented, err := kubeproxyconf.CommentOutKubeconfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		conf string
		pods []client.Object
		want string
	}{
		{"one node without", conf, []client.Object{yurthub("yurt-hub-worker-1", "worker-1")}, "yurthub does not run on master-1: there kube-proxy would reach the apiserver"},
		{"only the pooled node", conf, nil, "yurthub does not run on master-1: there kube-proxy would reach the apiserver"},
		{"a pooled node with yurthub as a service", conf, []client.Object{yurthub("yurt-hub-cloud-master-1", "master-1")}, ""},
		{"everywhere", conf, []client.Object{yurthub("yurt-hub-cloud-master-1", "master-1"), yurthub("yurt-hub-worker-1", "worker-1")}, ""},
		{"already commented out", commented, nil, "already commented out or empty"},
		{"empty", strings.Replace(conf, "kubeconfig: /var/lib/kube-proxy/kubeconfig.conf", `kubeconfig: ""`, 1), nil, "already commented out or empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: kubeProxyName},
				Data: map[string]string{kubeProxyConfKey: tc.conf}}
			c := fake.NewClientBuilder().WithObjects(append(append([]client.Object{cm}, nodes...), tc.pods...)...).Build()
			env := &engine.Env{Client: c}
			step := kubeProxyStep()
			reason, err := kubeProxySkipReason(ctx, env, kube.ConfigMapKeyEdit(kubeProxyName, kubeProxyConfKey, nil))
			if err != nil || !strings.Contains(reason, tc.want) || (tc.want == "") != (reason == "") {
				t.Fatalf("reason %q, %v; want %q", reason, err, tc.want)
			}
			if tc.want == "" {
				return
			}
			res, err := step.Install(ctx, env, newStepState())
			if err != nil || !res.Skipped || res.Changed || res.Summary != "skipped: "+reason {
				t.Errorf("install: %+v, %v; want it skipped with the reason", res, err)
			}
			got := &corev1.ConfigMap{}
			if err := c.Get(ctx, kube.Key(kubeProxyName), got); err != nil || got.Data[kubeProxyConfKey] != tc.conf {
				t.Errorf("the skipped step changed config.conf")
			}
		})
	}
}

// An install killed after it commented the line out finds it commented out:
// the step must finish (the rolling restart), not skip as "already
// commented out", and status must not call it skipped.
func TestKubeProxyFinishesInterruptedInstall(t *testing.T) {
	ctx := context.Background()
	var cm corev1.ConfigMap
	kubeadmObject(t, "kube-proxy.yaml", "ConfigMap", &cm)
	conf := cm.Data[kubeProxyConfKey]
	commented, err := kubeproxyconf.CommentOutKubeconfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: kubeProxyName},
		Data: map[string]string{kubeProxyConfKey: commented}}
	cs := kubefake.NewSimpleClientset()
	cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.35.0"}
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(&cm).Build(), Clientset: cs}
	env.Options.DryRun = true // the restart itself is the e2e tests' part
	edit := kube.ConfigMapKeyEdit(kubeProxyName, kubeProxyConfKey, nil)
	ss := newStepState()
	ss.Records[edit.Key] = engine.Record{Before: conf, After: commented}

	step := kubeProxyStep()
	if _, detail, err := step.Status(ctx, env, ss); err != nil || strings.Contains(detail, "skipped") {
		t.Errorf("status: %q, %v; want it not called skipped", detail, err)
	}
	res, err := step.Install(ctx, env, ss)
	if err != nil || res.Skipped || !strings.Contains(res.Summary, "completing an interrupted install") {
		t.Errorf("install: %+v, %v; want the interrupted install completed", res, err)
	}
}
