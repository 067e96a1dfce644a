package realcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// checkTunnelPath is the OpenYurt story end to end, after install: the
// apiserver reaches an edge node's kubelet, and a client an edge node's
// exporter, by node name through OpenYurt's yurt-tunnel-server and
// yurt-tunnel-agent. worker-1 refuses those ports to everyone but itself, as
// an edge node behind a firewall does: what reaches them came through the
// tunnel agent on the node.
func checkTunnelPath(t *testing.T) {
	worker := kc.Node("worker-1")
	runPod(t, cluster.ProbePod("probe-exporter", worker.Name, true, nil, "exporter", "--addr", ":9100", "--name", worker.Name))
	// The control-plane step restarted kube-apiserver, and yurt-tunnel-server
	// exits when it loses the apiserver: the kubelet's back-off brings it back.
	waitTunnelEndpoints(t, 5*time.Minute)
	lift, err := worker.RefuseFromOutside(10250, 9100)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lift(); err != nil {
			t.Error(err)
		}
	}()

	t.Run("kubectl logs and exec on an edge node through the tunnel", checkLogsAndExec)
	t.Run("the family kube-apiserver dials the tunnel in", checkTunnelFamily)

	t.Run("an extra tunnel port: https-proxy-ports 9100", func(t *testing.T) {
		url := "https://worker-1:9100/metrics"
		setServerConfig(t, map[string]any{"https-proxy-ports": "9100"})
		waitServicePort(t, "dnat-9100", tunnelnodes.DefaultHTTPSTargetPort, true)
		// kube-proxy programs the new port a moment after the EndpointSlice has it.
		out, ok := fetchFromPod(t, url)
		for i := 0; i < 3 && !ok; i++ {
			time.Sleep(2 * time.Second)
			out, ok = fetchFromPod(t, url)
		}
		// The agent on worker-1 dialled the exporter: the peer is the node itself.
		if want := fmt.Sprintf("probe_exporter_up{node=%q,peer=%q} 1", worker.Name, worker.IP); !ok || !strings.Contains(out, want) {
			t.Errorf("a pod on master-1 fetching %s: %q, want %s", url, out, want)
		}
		t.Run("Prometheus's targets by node name", checkPrometheusByName)
		setServerConfig(t, map[string]any{"https-proxy-ports": ""})
		waitServicePort(t, "dnat-9100", tunnelnodes.DefaultHTTPSTargetPort, false)
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

// fetchFromPod runs `probe fetch URL` in a pod on master-1 (the
// pod network, ClusterFirst DNS: names answered by coredns-yurt) and
// returns its output and whether it succeeded.
func fetchFromPod(t *testing.T, url string) (string, bool) {
	t.Helper()
	name := fmt.Sprintf("fetch-%d", time.Now().UnixNano()%1e6)
	ctx := context.Background()
	pod := cluster.ProbePod(name, kc.Master().Name, false, nil, "fetch", url)
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

// setServerConfig merges data into yurt-tunnel-server's ConfigMap, its
// other keys as they are; a nil value removes the key.
func setServerConfig(t *testing.T, data map[string]any) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"data": data})
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Patch(context.Background(), tunnelnodes.ServerConfigName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitServicePort waits until the tunnel Service has (or, with present
// false, lacks) port name, to target (the tunnel server's HTTPS or HTTP
// proxy port), in its EndpointSlices too.
func waitServicePort(t *testing.T, name string, target int32, present bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		svc, err := cs.CoreV1().Services("kube-system").Get(context.Background(), tunnelnodes.ServiceName, metav1.GetOptions{})
		if err == nil {
			has := false
			for _, p := range svc.Spec.Ports {
				has = has || (p.Name == name && p.TargetPort == intstr.FromInt32(target))
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

// waitTunnelEndpoints waits until the tunnel Service has yurt-tunnel-server
// as a ready endpoint.
func waitTunnelEndpoints(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
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
			t.Fatalf("the tunnel Service has no ready endpoint after %s", timeout)
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

// churnFor is how long checkTunnelDNSOff churns nodes in make test;
// BenchmarkTunnelNodesWriters churns for five minutes.
const churnFor = 30 * time.Second

// checkTunnelDNSOff: install switched yurt-tunnel-server's DNS controller
// off and the server runs so; under node churn the sync is the only writer
// of yurt-tunnel-nodes.
func checkTunnelDNSOff(t *testing.T, installOut string) {
	if !strings.Contains(installOut, "[tunnel-dns] ") || !strings.Contains(installOut, "--enable-dns-controller=false") {
		t.Errorf("install does not say it switched yurt-tunnel-server's DNS controller off:\n%s", installOut)
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=yurt-tunnel-server"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && !slices.Contains(p.Spec.Containers[0].Args, "--enable-dns-controller=false") {
			t.Errorf("yurt-tunnel-server pod %s runs with %v", p.Name, p.Spec.Containers[0].Args)
		}
	}
	changes, writes := churnNodes(t, churnFor)
	checkOnlySyncWrites(t, changes, writes)
}

// syncUser is the sync's identity in the audit log.
const syncUser = "system:serviceaccount:kube-system:tunnel-nodes-sync"

// checkOnlySyncWrites: no one but the sync wrote the records, and the sync
// at most once per change (and a few more for what its debounce splits).
func checkOnlySyncWrites(t testing.TB, changes int, writes map[string]int) {
	t.Helper()
	t.Logf("%d node changes: %s written %v (audit log: successful writes per user)", changes, tunnelnodes.ConfigMapName, writes)
	for user, n := range writes {
		if user != syncUser {
			t.Errorf("%s wrote %s %d times while the sync writes it", user, tunnelnodes.ConfigMapName, n)
		}
	}
	if n := writes[syncUser]; n == 0 || n > changes+2 {
		t.Errorf("the sync wrote %s %d times for %d node changes", tunnelnodes.ConfigMapName, n, changes)
	}
}

// churnNodes adds an edge Node every 2 s and deletes the one before, for d;
// it returns the number of changes and who wrote yurt-tunnel-nodes how often
// meanwhile. The records end with none of the churn's nodes.
func churnNodes(t testing.TB, d time.Duration) (changes int, writes map[string]int) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	prev := ""
	for i := 0; time.Since(start) < d; i++ {
		name := fmt.Sprintf("churn-%d", i)
		if err := cluster.CreateNodeObject(ctx, cs, name, fmt.Sprintf("198.51.100.%d", 100+i%100), map[string]string{tunnelnodes.EdgeNodeLabel: "true"}); err != nil {
			t.Fatal(err)
		}
		changes++
		if prev != "" {
			if err := cs.CoreV1().Nodes().Delete(ctx, prev, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			changes++
		}
		prev = name
		time.Sleep(2 * time.Second)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, prev, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changes++
	harness.Eventually(t, 30*time.Second, func() error {
		cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// Not the text from before the churn: the sync's first write after
		// install may still come, and on a dual-stack cluster it differs
		// from yurt-tunnel-server's (a line per family of a cloud node).
		if got := cm.Data[tunnelnodes.ConfigMapKey]; strings.Contains(got, "churn-") {
			return fmt.Errorf("after the churn %s still holds churned nodes: %q", tunnelnodes.ConfigMapName, got)
		}
		return nil
	})
	// The last write is in the audit log once its response went out.
	time.Sleep(2 * time.Second)
	writes, err := kc.ConfigMapWrites(tunnelnodes.ConfigMapName, start)
	if err != nil {
		t.Fatal(err)
	}
	return changes, writes
}

// restartTunnelAgent restarts yurt-tunnel-agent on worker-1 after a cut,
// as an operator must: yurt-tunnel-server dropped the agent during the cut,
// and the agent keeps its dead connection until the kernel's TCP keepalive
// (2 h idle here) tells it. It waits until the tunnel reaches the kubelet.
func restartTunnelAgent(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	deleteTunnelAgent(t)
	harness.Eventually(t, 2*time.Minute, func() error {
		_, err := kube.KubeletConfigz(ctx, cs, "worker-1")
		return err
	})
}

// deleteTunnelAgent deletes yurt-tunnel-agent's pod on worker-1, which its
// DaemonSet makes again.
func deleteTunnelAgent(t testing.TB) {
	t.Helper()
	if err := cs.CoreV1().Pods("kube-system").DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "k8s-app=yurt-tunnel-agent", FieldSelector: "spec.nodeName=worker-1"}); err != nil {
		t.Fatal(err)
	}
}
