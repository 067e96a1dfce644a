package steps

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"
)

// podMonitor is the part of a PodMonitor that decides what it scrapes.
type podMonitor struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port        string           `json:"port"`
			Relabelings []map[string]any `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// TestPodMonitorsSelectTheirPods: under every layout, and with the sync as
// yurt-tunnel-server's sidecar, each PodMonitor of the monitoring
// kustomization applied there selects the pods of its own workload, as
// install (or the sidecar component) makes them, and no other pods of
// kube-system the layout runs; the port it names is one those pods
// declare, and for the sync the one its metrics server listens on. Without
// the right selector YurtDNSSyncNotLeading, an absent() alert, fires
// forever, and coredns-yurt's alerts watch the wrong CoreDNS.
func TestPodMonitorsSelectTheirPods(t *testing.T) {
	var kubeadmCoreDNS, ravenProxyDNS, tunnelServer appsv1.Deployment
	var stockCorefile corev1.ConfigMap
	kubeadmObject(t, "coredns.yaml", "Deployment", &kubeadmCoreDNS)
	kubeadmObject(t, "coredns.yaml", "ConfigMap", &stockCorefile)
	repoObject(t, "test/testdata/raven/raven-proxy-dns.yaml", "Deployment", &ravenProxyDNS)
	repoObject(t, "test/cluster/openyurt-tunnel.yaml", "Deployment", &tunnelServer)
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(&stockCorefile).Build()}

	// The pod templates as install makes them.
	sync := func(dir string) corev1.PodTemplateSpec {
		objs, err := syncObjects(env, dir)
		if err != nil {
			t.Fatal(err)
		}
		return templateOfKind(t, objs, "Deployment")
	}
	nodeLocal := func(name string) corev1.PodTemplateSpec {
		l, err := layout.Named(name)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := nodeLocalObjects(context.Background(), env, l)
		if err != nil {
			t.Fatal(err)
		}
		return templateOfKind(t, objs, "DaemonSet")
	}
	corednsYurt, err := daemonSetFromDeployment(&kubeadmCoreDNS, "")
	if err != nil {
		t.Fatal(err)
	}
	ravenCoreDNSYurt := *ravenProxyDNS.Spec.Template.DeepCopy()
	if err := swapRavenProxyDNS(&ravenCoreDNSYurt.Spec, ""); err != nil {
		t.Fatal(err)
	}
	// The sidecar component on the test cluster's yurt-tunnel-server, as a
	// user's kustomization includes it.
	tunnelServerYAML, err := yaml.Marshal(tunnelServer)
	if err != nil {
		t.Fatal(err)
	}
	withSidecar, err := deploy.RenderSidecar(tunnelServerYAML)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, monitoring string
		// pods are the workloads by the PodMonitor that is to select them;
		// others run in kube-system too and must not be selected.
		pods, others map[string]corev1.PodTemplateSpec
	}{
		{
			name: layout.YurtTunnel, monitoring: deploy.Monitoring,
			pods: map[string]corev1.PodTemplateSpec{
				"tunnel-nodes-sync": sync(deploy.TunnelNodesSync), "coredns-yurt": corednsYurt.Spec.Template, "node-local-dns": nodeLocal(layout.YurtTunnel),
			},
			others: map[string]corev1.PodTemplateSpec{"yurt-tunnel-server": tunnelServer.Spec.Template},
		},
		{
			name: layout.YurtTunnel + ", the sync as yurt-tunnel-server's sidecar", monitoring: deploy.MonitoringSidecar,
			pods: map[string]corev1.PodTemplateSpec{
				"tunnel-nodes-sync": templateOfKind(t, withSidecar, "Deployment"), "coredns-yurt": corednsYurt.Spec.Template, "node-local-dns": nodeLocal(layout.YurtTunnel),
			},
		},
		{
			name: layout.Raven, monitoring: deploy.MonitoringRaven,
			pods: map[string]corev1.PodTemplateSpec{
				"tunnel-nodes-sync": sync(deploy.TunnelNodesSyncRaven), "coredns-yurt": ravenCoreDNSYurt, "node-local-dns": nodeLocal(layout.Raven),
			},
			// Under Raven the cluster's own CoreDNS keeps running as it is.
			others: map[string]corev1.PodTemplateSpec{"kube-dns (the cluster's CoreDNS)": kubeadmCoreDNS.Spec.Template},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := deploy.Render(tc.monitoring)
			if err != nil {
				t.Fatal(err)
			}
			monitored := map[string]bool{}
			for _, o := range objs {
				if o.GetKind() != "PodMonitor" {
					continue
				}
				var pm podMonitor
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &pm); err != nil {
					t.Fatal(err)
				}
				monitored[pm.Name] = true
				if err := checkPodMonitor(pm, tc.pods, tc.others); err != nil {
					t.Errorf("PodMonitor %s: %v", pm.Name, err)
				}
			}
			for name := range tc.pods {
				if !monitored[name] {
					t.Errorf("deploy/%s has no PodMonitor %s", tc.monitoring, name)
				}
			}
		})
	}

	// Every layout whose plan has the monitoring step is a case above.
	for _, l := range layout.All() {
		plan, err := Plan(l)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(plan, func(s engine.Step) bool { return s.Name == "monitoring" }) && l.Name != layout.YurtTunnel && l.Name != layout.Raven {
			t.Errorf("layout %s applies PodMonitors this test does not check", l.Name)
		}
	}
}

// checkPodMonitor: pm, in kube-system, selects the pods named after it and
// none of the others, at a port they declare.
func checkPodMonitor(pm podMonitor, pods, others map[string]corev1.PodTemplateSpec) error {
	if pm.Namespace != tunnelnodes.Namespace {
		return fmt.Errorf("in namespace %q, not with its pods in %s", pm.Namespace, tunnelnodes.Namespace)
	}
	selector, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		return err
	}
	own, ok := pods[pm.Name]
	if !ok {
		return fmt.Errorf("no workload of that name in this layout: it would select %v", selectedBy(selector, pods, others))
	}
	if selected := selectedBy(selector, pods, others); !slices.Equal(selected, []string{pm.Name}) {
		return fmt.Errorf("selector %s selects %v, want %s's pods alone (labels %v)", selector, selected, pm.Name, own.Labels)
	}
	if len(pm.Spec.PodMetricsEndpoints) == 0 {
		return fmt.Errorf("no endpoint")
	}
	for _, ep := range pm.Spec.PodMetricsEndpoints {
		if ep.Port == "" {
			// On the host network without ports: its relabelings must say
			// where (test/promrelabel runs them with Prometheus's code).
			if !slices.ContainsFunc(ep.Relabelings, func(r map[string]any) bool { return r["targetLabel"] == "__address__" }) {
				return fmt.Errorf("an endpoint without a port sets no __address__: Prometheus would scrape the pod IP at no port")
			}
			continue
		}
		if err := declaresMetricsPort(own.Spec, ep.Port); err != nil {
			return err
		}
	}
	return nil
}

// selectedBy are the names of the workloads whose pods selector selects.
func selectedBy(selector labels.Selector, pods, others map[string]corev1.PodTemplateSpec) []string {
	var selected []string
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		if selector.Matches(labels.Set(pods[name].Labels)) {
			selected = append(selected, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(others)) {
		if selector.Matches(labels.Set(others[name].Labels)) {
			selected = append(selected, name)
		}
	}
	return selected
}

// declaresMetricsPort: a container of spec declares a port named port;
// where that container sets --metrics-bind-address (the sync), it is the
// port its metrics server listens on.
func declaresMetricsPort(spec corev1.PodSpec, port string) error {
	for _, c := range append(spec.Containers, spec.InitContainers...) {
		i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == port })
		if i < 0 {
			continue
		}
		for _, arg := range c.Args {
			if addr, ok := strings.CutPrefix(arg, "--metrics-bind-address="); ok {
				if want := ":" + strconv.Itoa(int(c.Ports[i].ContainerPort)); addr != want {
					return fmt.Errorf("port %s is %d in container %s, whose metrics listen at %s", port, c.Ports[i].ContainerPort, c.Name, addr)
				}
			}
		}
		return nil
	}
	var declared []string
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			declared = append(declared, c.Name+"/"+p.Name)
		}
	}
	return fmt.Errorf("scrapes port %q, which no container declares (%v)", port, declared)
}

// templateOfKind is the pod template of the first object of kind in objs.
func templateOfKind(t *testing.T, objs []*unstructured.Unstructured, kind string) corev1.PodTemplateSpec {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		tmpl, _, err := unstructured.NestedMap(o.Object, "spec", "template")
		if err != nil {
			t.Fatal(err)
		}
		var pt corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt); err != nil {
			t.Fatal(err)
		}
		return pt
	}
	t.Fatalf("no %s rendered", kind)
	return corev1.PodTemplateSpec{}
}
