package e2e

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

const prometheusFixtures = "../testdata/prometheus/"

var serviceMonitors = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}

// TestInstallPrometheus: the prometheus step against prometheus-operator's
// ServiceMonitor CRD and kube-prometheus-shaped kubelet and node-exporter
// ServiceMonitors: skipped while there is no CRD; dry run diffs and changes
// nothing; install appends the node-name relabeling to every endpoint; a
// second install is a no-op; revert restores the objects exactly.
func TestInstallPrometheus(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	only := "--skip=rbac,corefile,coredns-daemonset,kube-dns-topology,kube-proxy,control-plane,sync"
	run := func(args ...string) string {
		t.Helper()
		return mustRunSync(t, cp.Kubeconfig, args...)
	}

	if out := run("install", only); !strings.Contains(out, "[prometheus] skipped: no ServiceMonitor CRD (monitoring.coreos.com/v1): prometheus-operator is not installed") {
		t.Errorf("install without the CRD:\n%s", out)
	}

	cp.CreateFromFile(t, prometheusFixtures+"servicemonitor-crd.yaml")
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	harness.Eventually(t, 10*time.Second, func() error {
		_, err := dyn.Resource(serviceMonitors).Namespace("monitoring").List(ctx, metav1.ListOptions{})
		return err
	})
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := run("install", only); !strings.Contains(out, "[prometheus] skipped: ServiceMonitor monitoring/kubelet not found; ServiceMonitor monitoring/node-exporter not found") {
		t.Errorf("install without the ServiceMonitors:\n%s", out)
	}
	cp.CreateFromFile(t, monitoringStack+"/kubernetesControlPlane-serviceMonitorKubelet.yaml")
	cp.CreateFromFile(t, monitoringStack+"/nodeExporter-serviceMonitor.yaml")
	get := func(name string) *unstructured.Unstructured {
		t.Helper()
		sm, err := dyn.Resource(serviceMonitors).Namespace("monitoring").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sm
	}
	origKubelet, origExporter := get("kubelet"), get("node-exporter")

	out := run("install", only, "--dry-run")
	for _, want := range []string{"[prometheus] would: ServiceMonitor monitoring/kubelet, monitoring/node-exporter: targets scraped by node name",
		"+++ ServiceMonitor monitoring/kubelet spec.endpoints[*].relabelings (yurtdns)", "+    - " + steps.KubeletNodeNameLabel,
		"+    - " + steps.NodeExporterNodeNameLabel} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if get("kubelet").GetResourceVersion() != origKubelet.GetResourceVersion() {
		t.Error("the dry run changed the kubelet ServiceMonitor")
	}

	out = run("install", only)
	if !strings.Contains(out, "[prometheus] ServiceMonitor monitoring/kubelet, monitoring/node-exporter: targets scraped by node name (__address__ relabelled)") {
		t.Errorf("install:\n%s", out)
	}
	for name, label := range map[string]string{"kubelet": steps.KubeletNodeNameLabel, "node-exporter": steps.NodeExporterNodeNameLabel} {
		endpoints, _, _ := unstructured.NestedSlice(get(name).Object, "spec", "endpoints")
		for i, e := range endpoints {
			rules := e.(map[string]any)["relabelings"].([]any)
			if !reflect.DeepEqual(rules[len(rules)-1], steps.NodeNameRelabeling(label)) {
				t.Errorf("%s endpoint %d: relabelings %v", name, i, rules)
			}
		}
	}
	installed := get("kubelet").GetResourceVersion()
	if out := run("install", only); !strings.Contains(out, "[prometheus] already applied") || get("kubelet").GetResourceVersion() != installed {
		t.Errorf("second install not a no-op:\n%s", out)
	}
	if out := run("status"); !strings.Contains(out, "prometheus         applied") {
		t.Errorf("status:\n%s", out)
	}

	out = run("revert", "--dry-run")
	if !strings.Contains(out, "[prometheus] would: restored ServiceMonitor monitoring/kubelet spec.endpoints[*].relabelings") ||
		!strings.Contains(out, "-    - "+steps.KubeletNodeNameLabel) || get("kubelet").GetResourceVersion() != installed {
		t.Errorf("revert --dry-run:\n%s", out)
	}
	run("revert")
	for name, orig := range map[string]*unstructured.Unstructured{"kubelet": origKubelet, "node-exporter": origExporter} {
		if now := get(name); !reflect.DeepEqual(now.Object["spec"], orig.Object["spec"]) {
			t.Errorf("%s not restored exactly:\n%v\nwant\n%v", name, now.Object["spec"], orig.Object["spec"])
		}
	}
	if out, err := runSync(t, cp, "status"); exitCode(t, err) != exitNotInstalled || !strings.Contains(out, "prometheus         not applied") {
		t.Errorf("status after revert (%v):\n%s", err, out)
	}

	// Only the kubelet's: that one is edited, the other named.
	if err := dyn.Resource(serviceMonitors).Namespace("monitoring").Delete(ctx, "node-exporter", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := run("install", only); !strings.Contains(out, "[prometheus] ServiceMonitor monitoring/kubelet: targets scraped by node name (__address__ relabelled) (ServiceMonitor monitoring/node-exporter not found)") {
		t.Errorf("install with the kubelet's ServiceMonitor only:\n%s", out)
	}
}

// mustRunSync runs a tunnel-nodes-sync subcommand against kubeconfig's
// cluster and returns its output; a failure fails the test.
func mustRunSync(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), append([]string{args[0], "--kubeconfig", kubeconfig, "--timeout", "20s"}, args[1:]...)...)
	if err := p.Wait(t, time.Minute); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, p.Output())
	}
	return p.Output()
}
