package e2e

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/test/harness"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// monitoringStack is the monitoring stack of the real-cluster tests: a
// kustomization of kube-prometheus's manifests.
const monitoringStack = "../testdata/monitoring"

// TestMonitoringStack: test/testdata/monitoring, applied as its
// kustomization says (kubectl, server-side, after prometheus-operator
// v0.85.0's CRDs from the tools build), is accepted whole by the CRDs'
// schemas with strict field validation; the Prometheus it defines selects
// yurtdns's own PodMonitors and PrometheusRule as install's monitoring step
// creates them; its ServiceAccount may discover what those monitors and the
// kubelet and node-exporter ServiceMonitors name, and read no secret; and
// install's prometheus step relabels those two ServiceMonitors through the
// real CRD, which keeps every rule, and revert restores them exactly.
func TestMonitoringStack(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	assets, err := harness.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	crds := filepath.Join(assets, "prometheus-operator-crds")
	kubectl := func(args ...string) string {
		t.Helper()
		p := harness.StartProcess(t, filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
		if err := p.Wait(t, time.Minute); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, p.Output())
		}
		return p.Output()
	}
	kubectl("apply", "--server-side", "-f", crds)
	kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", crds)
	kubectl("apply", "--server-side", "-k", monitoringStack)

	dyn := dynamic.NewForConfigOrDie(cp.Config)
	monitoring := func(plural string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: plural}
	}
	prom, err := dyn.Resource(monitoring("prometheuses")).Namespace("monitoring").Get(ctx, "k8s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Read back through the CRD's schema: a field it does not know would be gone.
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"nodeSelector", "kubernetes.io/hostname"}, "master-2"}, {[]string{"scrapeInterval"}, "15s"},
		{[]string{"evaluationInterval"}, "15s"}, {[]string{"imagePullPolicy"}, "IfNotPresent"},
		{[]string{"version"}, "3.16.0"}, {[]string{"serviceAccountName"}, "prometheus-k8s"},
	} {
		if got, _, _ := unstructured.NestedString(prom.Object, append([]string{"spec"}, c.path...)...); got != c.want {
			t.Errorf("Prometheus monitoring/k8s spec %v: %q, want %q", c.path, got, c.want)
		}
	}

	serviceMonitors := dyn.Resource(monitoring("servicemonitors")).Namespace("monitoring")
	nodeNameLabels := map[string]string{"kubelet": steps.KubeletNodeNameLabel, "node-exporter": steps.NodeExporterNodeNameLabel}
	getSpec := func(name string) map[string]any {
		t.Helper()
		sm, err := serviceMonitors.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sm.Object["spec"].(map[string]any)
	}
	applied := map[string]map[string]any{}
	for name := range nodeNameLabels {
		applied[name] = getSpec(name)
	}

	skip := "--skip=" + strings.Join(slices.DeleteFunc(layoutSteps(layout.YurtTunnel), func(s string) bool { return s == "monitoring" || s == "prometheus" }), ",")
	out := mustRunSync(t, cp.Kubeconfig, "install", skip)
	if !strings.Contains(out, "[prometheus] ServiceMonitor monitoring/kubelet, monitoring/node-exporter: targets scraped by node name") {
		t.Errorf("install:\n%s", out)
	}

	t.Run("the Prometheus selects yurtdns's monitors and rules", func(t *testing.T) {
		kubeSystem, err := cp.Client.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ plural, selector, namespaceSelector string }{
			{"podmonitors", "podMonitorSelector", "podMonitorNamespaceSelector"},
			{"prometheusrules", "ruleSelector", "ruleNamespaceSelector"},
		} {
			list, err := dyn.Resource(monitoring(c.plural)).Namespace("kube-system").List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) == 0 {
				t.Fatalf("yurtdns's %s: %v %v", c.plural, list, err)
			}
			objects, namespaces := promSelector(t, prom, c.selector), promSelector(t, prom, c.namespaceSelector)
			if !namespaces.Matches(labels.Set(kubeSystem.Labels)) {
				t.Errorf("%s %v does not select kube-system", c.namespaceSelector, namespaces)
			}
			for _, o := range list.Items {
				if !objects.Matches(labels.Set(o.GetLabels())) {
					t.Errorf("%s %v does not select %s %s", c.selector, objects, c.plural, o.GetName())
				}
			}
		}
	})

	t.Run("what the Prometheus and the operator may do", func(t *testing.T) {
		for _, c := range []struct {
			serviceAccount string
			attrs          authorizationv1.ResourceAttributes
			allow          bool
		}{
			// The kubelet authorizes the scrapes of /metrics, /metrics/cadvisor, ... as nodes/metrics.
			{"prometheus-k8s", authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "metrics", Name: "worker-1"}, true},
			{"prometheus-k8s", authorizationv1.ResourceAttributes{Verb: "list", Resource: "endpoints", Namespace: "kube-system"}, true},
			{"prometheus-k8s", authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods", Namespace: "kube-system"}, true},
			{"prometheus-k8s", authorizationv1.ResourceAttributes{Verb: "list", Resource: "services", Namespace: "monitoring"}, true},
			{"prometheus-k8s", authorizationv1.ResourceAttributes{Verb: "watch", Resource: "pods", Namespace: "monitoring"}, true},
			{"prometheus-k8s", authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, false},
			{"prometheus-k8s", authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods", Namespace: "yurtdns-records"}, false},
			{"prometheus-operator", authorizationv1.ResourceAttributes{Verb: "update", Resource: "endpoints", Namespace: "kube-system", Name: "kubelet"}, true},
			{"prometheus-operator", authorizationv1.ResourceAttributes{Verb: "create", Resource: "statefulsets", Group: "apps", Namespace: "monitoring"}, true},
			{"prometheus-operator", authorizationv1.ResourceAttributes{Verb: "create", Resource: "tokenreviews", Group: "authentication.k8s.io"}, false},
			{"node-exporter", authorizationv1.ResourceAttributes{Verb: "create", Resource: "tokenreviews", Group: "authentication.k8s.io"}, false},
		} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &c.attrs,
				User: "system:serviceaccount:monitoring:" + c.serviceAccount, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"}}}
			res, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status.Allowed != c.allow {
				t.Errorf("%s may %+v: %v, want %v", c.serviceAccount, c.attrs, res.Status.Allowed, c.allow)
			}
		}
	})

	t.Run("the prometheus step through the real CRD", func(t *testing.T) {
		for name, label := range nodeNameLabels {
			endpoints, _, _ := unstructured.NestedSlice(getSpec(name), "endpoints")
			for i, e := range endpoints {
				rules, _ := e.(map[string]any)["relabelings"].([]any)
				if len(rules) != 2 || !reflect.DeepEqual(rules[1], steps.NodeNameRelabeling(label)) {
					t.Errorf("%s endpoint %d: relabelings %v, want kube-prometheus's and the step's", name, i, rules)
				}
			}
		}
		mustRunSync(t, cp.Kubeconfig, "revert")
		for name, spec := range applied {
			if now := getSpec(name); !reflect.DeepEqual(now, spec) {
				t.Errorf("%s after revert:\n%v\nwant as applied:\n%v", name, now, spec)
			}
		}
	})
}

// promSelector is the label selector at spec.field of a Prometheus.
func promSelector(t *testing.T, prom *unstructured.Unstructured, field string) labels.Selector {
	t.Helper()
	raw, found, err := unstructured.NestedMap(prom.Object, "spec", field)
	if err != nil || !found {
		t.Fatalf("Prometheus %s: found %v, %v", field, found, err)
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}
