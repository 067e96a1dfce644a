package realcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkNodeJoinedToLogs: on the real cluster after install, a machine
// joins as a new edge node (kubeadm join under a new name) → `kubectl logs`
// of its kube-proxy pod works: kube-apiserver resolved the new name from its
// own view (ClusterFirstWithHostNet, the kube-dns Service), dialled the
// tunnel Service, and yurt-tunnel-server reached the new kubelet through the
// yurt-tunnel-agent the new node runs (the machine refuses its kubelet port
// to everyone but itself). The machine joins as yurtadm join does: kubeadm
// join, then yurthub in front of its kubelet. Side by
// side in one run, kube-dns backed by coredns-yurt (yurthosts) and by stock
// CoreDNS with kubeadm's Corefile plus upstream's DNS-mode hosts block
// reading the records ConfigMap mounted by the kubelet. The sync writes the
// records in both. The time until the pod runs is reported too: it bounds
// what DNS can win.
func BenchmarkNodeJoinedToLogs(b *testing.B) {
	const samples = 3
	ctx := context.Background()
	if out, err := runSync(b, "install", "--control-plane-jobs"); err != nil {
		b.Fatalf("install: %v\n%s", err, out)
	}
	defer runSync(b, "revert")
	spare, err := kc.AddSpareNode(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer spare.StopKubelet() // its last Node is deleted; nothing more runs there
	defer spare.StopYurthub()
	lift, err := spare.RefuseFromOutside(10250)
	if err != nil {
		b.Fatal(err)
	}
	defer lift()
	hostsLabels, _ := startUpstreamHostsDNS(b, "upstream-kube-dns", upstreamDNSModeCorefile(b))
	variants := []struct {
		name     string
		selector map[string]string // kube-dns's selector; nil keeps install's
	}{{"yurthosts", nil}, {"hosts-file", hostsLabels}}
	nodeName := func(variant string, i int) string { return fmt.Sprintf("edge-%s-%d", variant, i) }

	waitTunnelEndpoints(b, 5*time.Minute)

	kubeDNS, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer setKubeDNSSelector(b, kubeDNS.Spec.Selector)
	latencies := map[string][]time.Duration{}
	for _, v := range variants {
		if v.selector != nil {
			setKubeDNSSelector(b, v.selector)
		}
		for i := range samples {
			name := nodeName(v.name, i)
			joined := make(chan error, 1)
			go func() { joined <- spare.JoinAs(ctx, name) }()
			registered, err := waitNodeRegistered(ctx, name, 3*time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			running, logs, err := waitLogsOn(ctx, name, 5*time.Minute)
			if err := <-joined; err != nil {
				b.Fatal(err)
			}
			if err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			latencies[v.name] = append(latencies[v.name], logs.Sub(registered))
			b.Logf("%s: %s registered → its pod running %s → kubectl logs works %s", v.name, name,
				running.Sub(registered).Round(time.Millisecond), logs.Sub(registered).Round(time.Millisecond))
			if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, v := range variants {
		l := latencies[v.name]
		slices.Sort(l)
		b.Logf("%s: node joined → kubectl logs on it, n=%d: p50 %s, max %s", v.name, len(l), l[len(l)/2].Round(time.Millisecond), l[len(l)-1].Round(time.Millisecond))
		b.ReportMetric(float64(l[len(l)/2].Milliseconds()), v.name+"-p50-ms")
		b.ReportMetric(float64(l[len(l)-1].Milliseconds()), v.name+"-max-ms")
	}
}

// upstreamDNSModeCorefile is kubeadm's Corefile with the block OpenYurt's
// DNS-mode guide adds before the kubernetes plugin.
func upstreamDNSModeCorefile(b *testing.B) string {
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	const hosts = "    hosts /etc/edge/tunnel-nodes {\n        reload 300ms\n        fallthrough\n    }\n"
	corefile := cm.Data["Corefile"]
	i := strings.Index(corefile, "    kubernetes ")
	if i < 0 {
		b.Fatalf("kubeadm's Corefile has no kubernetes plugin:\n%s", corefile)
	}
	return corefile[:i] + hosts + corefile[i:]
}

// setKubeDNSSelector points the kube-dns Service at other pods and waits
// until its EndpointSlices hold only them, then gives kube-proxy a moment.
func setKubeDNSSelector(b *testing.B, selector map[string]string) {
	ctx := context.Background()
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	svc.Spec.Selector = selector
	if _, err := cs.CoreV1().Services("kube-system").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: selector})})
	if err != nil {
		b.Fatal(err)
	}
	// The EndpointSlice controller leaves out the pods of a deleted node
	// (a joined name the benchmark removed) that the pod GC has not deleted yet.
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	want := map[string]bool{}
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil &&
			slices.ContainsFunc(nodes.Items, func(n corev1.Node) bool { return n.Name == p.Spec.NodeName }) {
			want[p.Status.PodIP] = true
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		list, err := cs.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kube-dns"})
		if err != nil {
			b.Fatal(err)
		}
		got := map[string]bool{}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					got[a] = true
				}
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("kube-dns endpoints %v, want %v", got, want)
		}
	}
	time.Sleep(3 * time.Second) // kube-proxy syncs at most 1 s after an endpoint change
}

// waitNodeRegistered returns when the Node object first appeared.
func waitNodeRegistered(ctx context.Context, name string, timeout time.Duration) (time.Time, error) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return time.Now(), nil
		}
		if !apierrors.IsNotFound(err) {
			return time.Time{}, err
		}
	}
	return time.Time{}, fmt.Errorf("node %s not registered after %s", name, timeout)
}

// waitLogsOn asks for the logs of the kube-proxy pod on node until kubectl
// gets them, and returns when the pod was first seen running and when the
// logs came.
func waitLogsOn(ctx context.Context, node string, timeout time.Duration) (running, logs time.Time, err error) {
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy", FieldSelector: "spec.nodeName=" + node})
		if err != nil || len(pods.Items) == 0 || !containerStarted(&pods.Items[0]) {
			continue
		}
		if running.IsZero() {
			running = time.Now()
		}
		out, err := kc.Kubectl(ctx, "-n", "kube-system", "logs", pods.Items[0].Name, "--tail=1", "--request-timeout=10s")
		if err == nil && strings.TrimSpace(out) != "" {
			return running, time.Now(), nil
		}
		last = firstLine(out)
	}
	return running, time.Time{}, fmt.Errorf("kubectl logs on %s not working after %s (pod running: %v): %s", node, timeout, !running.IsZero(), last)
}

func containerStarted(p *corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil {
			return true
		}
	}
	return false
}
