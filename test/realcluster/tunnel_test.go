package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// checkTunnelPath is the OpenYurt story end to end, after install: the
// apiserver reaches an edge node's kubelet, and a client an edge node's
// exporter, by node name through the tunnel Service — behind which runs
// test/tunnelstandin, a stand-in for yurt-tunnel-server.
func checkTunnelPath(t *testing.T) {
	ctx := context.Background()
	runPod(t, kc.TunnelStandinServer())
	runPod(t, cluster.StandinPod("standin-exporter", "worker-1", true, nil, "exporter", "--addr", ":9100", "--name", "worker-1"))
	waitTunnelEndpoints(t)

	t.Run("kubectl logs and exec on an edge node through the tunnel", func(t *testing.T) {
		pod := podOn(t, "k8s-app=kube-proxy", "worker-1")
		before := standinConnections(t)["worker-1"]["10250"]
		logs, err := kc.Kubectl(ctx, "-n", "kube-system", "logs", pod, "--tail=3")
		if err != nil || strings.TrimSpace(logs) == "" {
			t.Errorf("kubectl logs %s on worker-1: %v %q", pod, err, logs)
		}
		out, err := kc.Kubectl(ctx, "-n", "kube-system", "exec", pod, "--", "/usr/local/bin/kube-proxy", "--version")
		if err != nil || !strings.Contains(out, "v1.37.1") {
			t.Errorf("kubectl exec %s on worker-1: %v %q", pod, err, out)
		}
		after := standinConnections(t)["worker-1"]["10250"]
		t.Logf("the stand-in forwarded %d connection(s) to worker-1:10250 for kubectl logs and exec", after-before)
		if after-before < 2 {
			t.Errorf("the stand-in saw %d connections to worker-1's kubelet, want one for logs and one for exec: the apiserver did not go through the tunnel Service", after-before)
		}
	})

	t.Run("an extra tunnel port: https-proxy-ports 9100", func(t *testing.T) {
		url := "https://worker-1:9100/metrics"
		setServerConfigPorts(t, "9100")
		waitServicePort(t, "dnat-9100", true)
		before := standinConnections(t)["worker-1"]["9100"]
		// kube-proxy programs the new port a moment after the EndpointSlice has it.
		out, ok := fetchFromPod(t, url)
		for i := 0; i < 3 && !ok; i++ {
			time.Sleep(2 * time.Second)
			out, ok = fetchFromPod(t, url)
		}
		if !ok || !strings.Contains(out, `standin_exporter_up{node="worker-1"} 1`) {
			t.Errorf("a pod on master-1 fetching %s: %q", url, out)
		}
		if got := standinConnections(t)["worker-1"]["9100"]; got <= before {
			t.Errorf("the stand-in forwarded nothing to worker-1:9100")
		}
		t.Run("Prometheus's targets by node name", checkPrometheusByName)
		setServerConfigPorts(t, "")
		waitServicePort(t, "dnat-9100", false)
		if out, ok := fetchFromPod(t, url); ok {
			t.Errorf("with 9100 removed from https-proxy-ports, %s still answered: %q", url, out)
		}
	})
}

// runPod creates the pod and waits until it is Ready; it is deleted when
// the test ends.
func runPod(t testing.TB, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		grace := int64(0)
		cs.CoreV1().Pods("kube-system").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		waitPodGone(t, pod.Name)
	})
	if _, err := kc.WaitPod(ctx, pod.Name, 2*time.Minute, cluster.PodReady); err != nil {
		t.Fatal(err)
	}
}

func waitPodGone(t testing.TB, name string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err := cs.CoreV1().Pods("kube-system").Get(context.Background(), name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
	}
	t.Errorf("pod %s not gone after 1m", name)
}

// fetchFromPod runs `tunnel-standin fetch URL` in a pod on master-1 (the
// pod network, ClusterFirst DNS: names answered by coredns-yurt) and
// returns its output and whether it succeeded.
func fetchFromPod(t *testing.T, url string) (string, bool) {
	t.Helper()
	name := fmt.Sprintf("fetch-%d", time.Now().UnixNano()%1e6)
	ctx := context.Background()
	pod := cluster.StandinPod(name, kc.Master().Name, false, nil, "fetch", url)
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Pods("kube-system").Delete(ctx, name, metav1.DeleteOptions{})
	p, err := kc.WaitPod(ctx, name, 2*time.Minute, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := kc.Kubectl(ctx, "-n", "kube-system", "logs", name)
	return logs, p.Status.Phase == corev1.PodSucceeded
}

func setServerConfigPorts(t *testing.T, ports string) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.ServerConfigName, Namespace: "kube-system"},
		Data:       map[string]string{"https-proxy-ports": ports},
	}
	_, err := cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cs.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func waitServicePort(t *testing.T, name string, present bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		svc, err := cs.CoreV1().Services("kube-system").Get(context.Background(), tunnelnodes.ServiceName, metav1.GetOptions{})
		if err == nil {
			has := false
			for _, p := range svc.Spec.Ports {
				has = has || (p.Name == name && p.TargetPort == intstr.FromInt32(tunnelnodes.DefaultHTTPSTargetPort))
			}
			if has == present && endpointSlicePort(name) == present {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tunnel Service port %s present=%v not reached in 1m", name, present)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// endpointSlicePort reports whether the tunnel Service's EndpointSlices
// carry the port (kube-proxy programs a port from them).
func endpointSlicePort(name string) bool {
	slices, err := cs.DiscoveryV1().EndpointSlices("kube-system").List(context.Background(),
		metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + tunnelnodes.ServiceName})
	if err != nil {
		return false
	}
	for _, s := range slices.Items {
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == name {
				return true
			}
		}
	}
	return false
}

// waitTunnelEndpoints waits until the tunnel Service has the stand-in as a
// ready endpoint.
func waitTunnelEndpoints(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		slices, err := cs.DiscoveryV1().EndpointSlices("kube-system").List(context.Background(),
			metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + tunnelnodes.ServiceName})
		if err == nil {
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready != nil && *e.Conditions.Ready {
						return
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the tunnel Service has no ready endpoint after 1m")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func podOn(t *testing.T, selector, node string) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no pod %s on %s: %v", selector, node, err)
	}
	return pods.Items[0].Name
}

// standinConnections reads the stand-in's counts: node → port → connections.
func standinConnections(t testing.TB) map[string]map[string]int {
	t.Helper()
	resp, err := http.Get(kc.TunnelStandinStatsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var counts map[string]map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&counts); err != nil {
		t.Fatal(err)
	}
	return counts
}
