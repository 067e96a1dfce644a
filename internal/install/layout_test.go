package install_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/internal/tunnelsync"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testProxy is a third tunnel layout, known only to this file: every node
// through its proxy Service, as under Raven's L7 proxy.
var testProxy = layout.Layout{
	Name: "test-proxy", Help: "this test's proxy",
	RecordsConfigMap: "test-proxy-nodes", Service: "x-test-proxy-svc",
	Rules: func(_ map[string]string, proxyIP netip.Addr) (tunnelnodes.Rules, bool) {
		return tunnelnodes.RavenRules(true, proxyIP), proxyIP.IsValid()
	},
	NeedsTunnel:       true,
	ProxiesCloudNodes: true,
	Preflight:         func(func(client.Object, string) (bool, error), io.Writer) error { return nil },
}

// proxyServiceStep, the layout's one step of its own, creates its proxy
// Service and deletes it on revert.
func proxyServiceStep() engine.Step {
	svc := func() *unstructured.Unstructured {
		return kube.ToUnstructured(&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: testProxy.Service},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 10250}}},
		}, "v1", "Service")
	}
	return engine.Step{
		Name: "proxy-service",
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			created, diff, err := kube.EnsureCreated(ctx, env, ss, svc())
			if err != nil || !created {
				return engine.Result{Summary: "already applied"}, err
			}
			return engine.Result{Changed: true, Diffs: []string{diff}, Summary: "created " + kube.ObjectKey(svc())}, nil
		},
		Revert: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			deleted, err := kube.DeleteCreated(ctx, env, ss, svc())
			if err != nil || !deleted {
				return engine.Result{Summary: "nothing to delete"}, err
			}
			return engine.Result{Changed: true, Summary: "deleted " + kube.ObjectKey(svc())}, nil
		},
		Status: func(ctx context.Context, env *engine.Env, _ *engine.StepState) (engine.StepStatus, string, error) {
			if ok, err := kube.ExistsAll(ctx, env, []*unstructured.Unstructured{svc()}); err != nil || !ok {
				return engine.NotApplied, "", err
			}
			return engine.Applied, "", nil
		},
	}
}

// A layout registered in this file alone, with one step of its own, works
// like the shipped ones: install, status, the sync writing its records by
// its rules, and revert.
func TestRegisteredLayout(t *testing.T) {
	if _, err := layout.Named(testProxy.Name); err != nil {
		layout.Register(testProxy)
		steps.AddPlan(testProxy.Name, func(layout.Layout) []engine.Step { return []engine.Step{proxyServiceStep()} })
	}
	cp := harness.Start(t, harness.Options{})
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env := &engine.Env{Client: c, Clientset: cp.Client, Options: engine.Options{Profile: testProxy.Name, Timeout: time.Minute}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	run := func(what string, f func(io.Writer) error, want string) {
		t.Helper()
		var out bytes.Buffer
		if err := f(&out); err != nil || out.String() != want {
			t.Fatalf("%s: %v\n%s\nwant:\n%s", what, err, out.String(), want)
		}
	}
	install1 := func(out io.Writer) error { return install.Install(ctx, env, out) }
	run("install", install1, "[proxy-service] created Service kube-system/x-test-proxy-svc\n[node-local-dns] not requested (--node-local-dns)\n")
	run("install again", install1, "[proxy-service] already applied\n[node-local-dns] not requested (--node-local-dns)\n")
	run("status", func(out io.Writer) error {
		report, err := install.Status(ctx, env)
		for _, r := range report.Steps {
			fmt.Fprintf(out, "%s %s\n", r.Step, r.Status)
		}
		fmt.Fprintf(out, "%s: %s\n", report.Profile, report.Result)
		return err
	}, "proxy-service applied\nnode-local-dns not applied\n"+testProxy.Name+": applied\n")

	svc, err := cp.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, testProxy.Service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := tunnelsync.NewManager(cp.Config, tunnelsync.Config{
		Namespace: tunnelnodes.Namespace, ConfigMap: testProxy.RecordsConfigMap, ConfigMapKey: tunnelnodes.ConfigMapKey,
		Service: testProxy.Service, Layout: testProxy,
		EdgeNodeSelector: labels.SelectorFromSet(labels.Set{tunnelnodes.EdgeNodeLabel: "true"}),
		HTTPSTargetPort:  10263, HTTPTargetPort: 10264,
	}, tunnelsync.ManagerOptions{QPS: 100, Burst: 200, MetricsBindAddress: "0", HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	cp.CreateNode(t, harness.Node{Name: "cloud-1", InternalIP: "192.0.2.1"})
	cp.CreateNode(t, harness.Node{Name: "edge-1", InternalIP: "192.0.2.2", Edge: true})
	want := svc.Spec.ClusterIP + "\tcloud-1\n" + svc.Spec.ClusterIP + "\tedge-1"
	harness.Eventually(t, 30*time.Second, func() error {
		cm, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, testProxy.RecordsConfigMap, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(cm.Data[tunnelnodes.ConfigMapKey]); got != want {
			return fmt.Errorf("records %q, want %q", got, want)
		}
		return nil
	})

	run("revert", func(out io.Writer) error { return install.Revert(ctx, env, out) },
		"[node-local-dns] not applied: nothing to revert\n[proxy-service] deleted Service kube-system/x-test-proxy-svc\n")
	for _, get := range []func() error{
		func() error {
			_, err := cp.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, testProxy.Service, metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, engine.StateConfigMap, metav1.GetOptions{})
			return err
		},
	} {
		if err := get(); !apierrors.IsNotFound(err) {
			t.Errorf("after revert: %v, want not found", err)
		}
	}
}
