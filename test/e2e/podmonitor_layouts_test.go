package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// TestPodMonitorsSelectLayoutPods: in each layout the pods are made as
// that layout makes them — install (with --node-local-dns) by the real
// binary, the sidecar by kubectl from a user's kustomization of
// yurt-tunnel-server with the component, the rollout controllers played
// on envtest — and the PodMonitors are the ones that layout applies
// (install's monitoring step, or kubectl apply -k for the sidecar). Each
// PodMonitor, read back from the apiserver, selects through the
// apiserver's own label selection, in the namespaces it looks in, pods of
// its own workload and of no other (under Raven, kubeadm's CoreDNS keeps
// running as kube-dns's pods and is not coredns-yurt), and every selected
// pod has the container port it names or, without a port, the container
// its keep relabeling keeps. A PodMonitor that selects nothing leaves an
// absent() alert firing forever (YurtDNSSyncNotLeading).
func TestPodMonitorsSelectLayoutPods(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		install func(t *testing.T) *harness.ControlPlane
		// want is the workload each PodMonitor is to select the pods of.
		want map[string]string
	}{
		{
			name: layout.YurtTunnel,
			install: func(t *testing.T) *harness.ControlPlane {
				k := newMonitoredKubeadmCluster(t)
				if out, err := k.run(t, append([]string{"install", "--node-local-dns"}, testImages...)...); err != nil {
					t.Fatalf("install: %v\n%s", err, out)
				}
				return k.ControlPlane
			},
			want: map[string]string{"tunnel-nodes-sync": "Deployment/tunnel-nodes-sync", "coredns-yurt": "DaemonSet/coredns", "node-local-dns": "DaemonSet/node-local-dns"},
		},
		{
			// The sync in yurt-tunnel-server's pods; the rest as install
			// makes it, without its own sync and deploy/monitoring.
			name: layout.YurtTunnel + "-sidecar",
			install: func(t *testing.T) *harness.ControlPlane {
				k := newMonitoredKubeadmCluster(t)
				kubectl(t, k.ControlPlane, "apply", "-k", sidecarKustomization(t, k.ControlPlane))
				if out, err := k.run(t, append([]string{"install", "--node-local-dns", "--skip=sync,monitoring"}, testImages...)...); err != nil {
					t.Fatalf("install: %v\n%s", err, out)
				}
				kubectl(t, k.ControlPlane, "apply", "-k", repoPath(t, "deploy/tunnel-nodes-sync/sidecar/monitoring"))
				return k.ControlPlane
			},
			want: map[string]string{"tunnel-nodes-sync": "Deployment/yurt-tunnel-server", "coredns-yurt": "DaemonSet/coredns", "node-local-dns": "DaemonSet/node-local-dns"},
		},
		{
			name: layout.Raven,
			install: func(t *testing.T) *harness.ControlPlane {
				cp := newRavenCluster(t)
				// A Raven cluster's own CoreDNS: kubeadm's, which install
				// --profile raven leaves as it is.
				cp.CreateFromFile(t, filepath.Join(fixtures, "coredns.yaml"))
				playMonitoredCluster(t, cp)
				if out, err := runSync(t, cp, append([]string{"install", "--profile", "raven", "--node-local-dns"}, testImages...)...); err != nil {
					t.Fatalf("install: %v\n%s", err, out)
				}
				return cp
			},
			want: map[string]string{"tunnel-nodes-sync": "Deployment/tunnel-nodes-sync", "coredns-yurt": "Deployment/raven-proxy-dns", "node-local-dns": "DaemonSet/node-local-dns"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cp := tc.install(t)
			ctx := context.Background()
			waitForWorkloadPods(t, cp, tc.want)
			list, err := dynamic.NewForConfigOrDie(cp.Config).Resource(podMonitorsResource).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range list.Items {
				var pm podMonitor
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &pm); err != nil {
					t.Fatal(err)
				}
				names = append(names, pm.Name)
				t.Run(pm.Name, func(t *testing.T) {
					want, ok := tc.want[pm.Name]
					if !ok {
						t.Fatalf("a PodMonitor %s/%s this layout does not apply", pm.Namespace, pm.Name)
					}
					checkLayoutPodMonitor(ctx, t, cp, pm, want)
				})
			}
			for name := range tc.want {
				if !slices.Contains(names, name) {
					t.Errorf("no PodMonitor %s on the cluster (there are %v)", name, names)
				}
			}
		})
	}
}

// testImages are the images install is given (envtest runs no container).
var testImages = []string{"--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test"}

var podMonitorsResource = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"}

// newMonitoredKubeadmCluster is newKubeadmCluster with an edge node cut
// off and prometheus-operator's CRDs, the controllers envtest lacks played.
func newMonitoredKubeadmCluster(t *testing.T) *kubeadmCluster {
	k := newKubeadmCluster(t)
	k.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true, Labels: map[string]string{"kubernetes.io/os": "linux"}})
	createYurthub(t, k.ControlPlane, "worker-1")
	playMonitoredCluster(t, k.ControlPlane)
	return k
}

// playMonitoredCluster adds prometheus-operator's PodMonitor and
// PrometheusRule CRDs (deploy/monitoring applies both kinds), and plays what envtest does
// not run: the rollout controllers, and the Job controller for the
// node-local-dns step's kubelet switch (whose Job would restart a real
// kubelet) until the test ends.
func playMonitoredCluster(t *testing.T, cp *harness.ControlPlane) {
	for _, kind := range []string{"podmonitor", "prometheusrule"} {
		cp.CreateFromFile(t, prometheusFixtures+kind+"-crd.yaml")
		harness.Eventually(t, 10*time.Second, func() error {
			_, err := dynamic.NewForConfigOrDie(cp.Config).Resource(podMonitorsResource.GroupVersion().WithResource(kind+"s")).
				List(context.Background(), metav1.ListOptions{})
			return err
		})
	}
	t.Cleanup(cp.PlayRolloutControllers(tunnelnodes.Namespace))
	t.Cleanup(completeJobs(t, cp, "switch-kubelet"))
}

// sidecarKustomization is a user's kustomization of the yurt-tunnel-server
// Deployment the cluster runs (its manifest: the live object's labels and
// spec), with the sidecar component added as
// deploy/tunnel-nodes-sync/sidecar's comment says; its directory.
func sidecarKustomization(t *testing.T, cp *harness.ControlPlane) string {
	t.Helper()
	live, err := cp.Client.AppsV1().Deployments(tunnelnodes.Namespace).Get(context.Background(), "yurt-tunnel-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := yaml.Marshal(appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: live.Name, Namespace: live.Namespace, Labels: live.Labels}, Spec: live.Spec})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kustomize takes no absolute path to a component.
	component, err := filepath.Rel(dir, repoPath(t, "deploy/tunnel-nodes-sync/sidecar"))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: kube-system\n" +
		"resources:\n- tunnel-server.yaml\ncomponents:\n- " + component + "\n"
	for name, data := range map[string][]byte{"kustomization.yaml": []byte(kustomization), "tunnel-server.yaml": manifest} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// repoPath is the absolute path of rel in this repository.
func repoPath(t *testing.T, rel string) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}

// kubectl runs the tools build's kubectl against cp.
func kubectl(t *testing.T, cp *harness.ControlPlane, args ...string) string {
	t.Helper()
	assets, err := harness.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	p := harness.StartProcess(t, filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	if err := p.Wait(t, time.Minute); err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, p.Output())
	}
	return p.Output()
}

// waitForWorkloadPods waits until each workload has pods (the played
// controllers make them a round after install has made the workload).
func waitForWorkloadPods(t *testing.T, cp *harness.ControlPlane, workloads map[string]string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, func() error {
		pods, err := cp.Client.CoreV1().Pods(tunnelnodes.Namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, p := range pods.Items {
			w, err := workloadOf(context.Background(), cp, &p)
			if err != nil {
				return err
			}
			have[w] = true
		}
		for _, w := range workloads {
			if !have[w] {
				return fmt.Errorf("%s has no pods yet", w)
			}
		}
		return nil
	})
}

// podMonitor is what decides which pods and ports a PodMonitor scrapes
// (prometheus-operator v0.85.0's monitoring.coreos.com/v1 fields).
type podMonitor struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any"`
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		PodMetricsEndpoints []struct {
			Port        string       `json:"port"`
			PortNumber  int32        `json:"portNumber"`
			Relabelings []relabeling `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// relabeling is what a keep relabeling of a PodMonitor endpoint matches.
type relabeling struct {
	Action       string   `json:"action"`
	SourceLabels []string `json:"sourceLabels"`
	Regex        string   `json:"regex"`
}

// namespaces are the namespaces pm looks in ("" for all), as
// prometheus-operator reads namespaceSelector: its own unless it says.
func (pm podMonitor) namespaces() []string {
	switch ns := pm.Spec.NamespaceSelector; {
	case ns.Any:
		return []string{metav1.NamespaceAll}
	case len(ns.MatchNames) > 0:
		return ns.MatchNames
	}
	return []string{pm.Namespace}
}

// checkLayoutPodMonitor: pm selects pods, all of the workload want, each
// with the port (or the kept container) of every endpoint.
func checkLayoutPodMonitor(ctx context.Context, t *testing.T, cp *harness.ControlPlane, pm podMonitor, want string) {
	t.Helper()
	selector, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	var selected []corev1.Pod
	for _, ns := range pm.namespaces() {
		// The apiserver selects, as it does for Prometheus's discovery.
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			t.Fatal(err)
		}
		selected = append(selected, pods.Items...)
	}
	if len(selected) == 0 {
		t.Fatalf("selector %q selects no pod in namespaces %q; %s's pods are labelled %v",
			selector, pm.namespaces(), want, workloadPodLabels(ctx, cp, want))
	}
	var errs []error
	ownSelected := 0
	for _, pod := range selected {
		w, err := workloadOf(ctx, cp, &pod)
		if err != nil {
			t.Fatal(err)
		}
		if w != want {
			errs = append(errs, fmt.Errorf("selector %q selects pod %s/%s of %s, not only %s's", selector, pod.Namespace, pod.Name, w, want))
			continue
		}
		ownSelected++
		if len(pm.Spec.PodMetricsEndpoints) == 0 {
			errs = append(errs, fmt.Errorf("no podMetricsEndpoints"))
		}
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			containers := append(slices.Clone(pod.Spec.Containers), pod.Spec.InitContainers...)
			switch {
			case ep.Port != "" || ep.PortNumber != 0:
				if !slices.ContainsFunc(containers, func(c corev1.Container) bool {
					return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
						return (ep.Port == "" || p.Name == ep.Port) && (ep.PortNumber == 0 || p.ContainerPort == ep.PortNumber)
					})
				}) {
					errs = append(errs, fmt.Errorf("endpoint port %q/%d: no container of pod %s (%s) declares it; its ports: %v", ep.Port, ep.PortNumber, pod.Name, w, containerPorts(containers)))
				}
			default:
				// Without a port Prometheus makes a target of every
				// container: a keep on the container's name picks one.
				keep := slices.IndexFunc(ep.Relabelings, func(r relabeling) bool {
					return strings.EqualFold(r.Action, "keep") && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_pod_container_name"})
				})
				if keep < 0 {
					errs = append(errs, fmt.Errorf("an endpoint without a port and no keep on __meta_kubernetes_pod_container_name: every container of %s is a target", w))
					continue
				}
				regex := ep.Relabelings[keep].Regex
				if regex == "" {
					regex = "(.*)" // Prometheus's default
				}
				// Prometheus anchors relabeling regexes.
				re, err := regexp.Compile("^(?:" + regex + ")$")
				if err != nil {
					errs = append(errs, err)
					continue
				}
				// An init container has exited by the time it is scraped.
				matches := func(c corev1.Container) bool { return re.MatchString(c.Name) }
				if !slices.ContainsFunc(pod.Spec.Containers, matches) || slices.ContainsFunc(pod.Spec.InitContainers, matches) {
					errs = append(errs, fmt.Errorf("keeps container %q: pod %s (%s) has containers %v and init containers %v",
						regex, pod.Name, w, containerPorts(pod.Spec.Containers), containerPorts(pod.Spec.InitContainers)))
				}
			}
		}
	}
	if ownSelected == 0 {
		errs = append(errs, fmt.Errorf("selector %q selects none of %s's pods (labelled %v)", selector, want, workloadPodLabels(ctx, cp, want)))
	}
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("selector %q in %q: %d pods of %s, %d of other workloads", selector, pm.namespaces(), ownSelected, want, len(selected)-ownSelected)
}

// containerPorts names each container and its ports, for messages.
func containerPorts(containers []corev1.Container) []string {
	var out []string
	for _, c := range containers {
		var ports []string
		for _, p := range c.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d", p.Name, p.ContainerPort))
		}
		out = append(out, c.Name+"["+strings.Join(ports, " ")+"]")
	}
	return out
}

// workloadOf is "Kind/name" of the workload that made pod (a Deployment
// through its ReplicaSet), or "Pod/name" for a pod of none (a mirror pod).
func workloadOf(ctx context.Context, cp *harness.ControlPlane, pod *corev1.Pod) (string, error) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return "Pod/" + pod.Name, nil
	}
	if owner.Kind != "ReplicaSet" {
		return owner.Kind + "/" + owner.Name, nil
	}
	rs, err := cp.Client.AppsV1().ReplicaSets(pod.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if d := metav1.GetControllerOf(rs); d != nil {
		return d.Kind + "/" + d.Name, nil
	}
	return "ReplicaSet/" + rs.Name, nil
}

// workloadPodLabels are the labels of the pods workload makes, for messages.
func workloadPodLabels(ctx context.Context, cp *harness.ControlPlane, workload string) []map[string]string {
	pods, err := cp.Client.CoreV1().Pods(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []map[string]string
	for _, p := range pods.Items {
		if w, err := workloadOf(ctx, cp, &p); err == nil && w == workload {
			out = append(out, p.Labels)
		}
	}
	return out
}
