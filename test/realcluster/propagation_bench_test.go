package realcluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// upstreamHostsCorefile is how OpenYurt serves the records: stock CoreDNS
// reading the records ConfigMap mounted as a file by the kubelet.
const upstreamHostsCorefile = `.:53 {
    errors
    hosts /etc/edge/tunnel-nodes {
        reload 300ms
    }
}
`

// BenchmarkNodeAddedToAnswer: on the real cluster, a node added in the API
// → its name answered to a client in a pod through a Service, side by side
// in one run: yurthosts behind kube-dns (after install) vs stock CoreDNS's
// hosts plugin reading the same records ConfigMap mounted as a volume by the
// real kubelet (the upstream way). Both read what the sync writes.
func BenchmarkNodeAddedToAnswer(b *testing.B) {
	const samples = 5
	ctx := context.Background()
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if out, err := runSync(b, "install", "--skip", "control-plane"); err != nil {
		b.Fatalf("install: %v\n%s", err, out)
	}
	defer runSync(b, "revert")
	_, hostsIP := startUpstreamHostsDNS(b, "upstream-hosts-dns", upstreamHostsCorefile)

	var names []string
	for i := range samples {
		names = append(names, fmt.Sprintf("bench-edge-%d", i))
	}
	watchers := map[string]string{"yurthosts": cluster.KubeDNSIP(), "hosts-file": hostsIP}
	for name, server := range watchers {
		pod := cluster.ProbePod("watch-"+name, kc.Master().Name, false, nil,
			"watch-dns", "--server", server+":53", "--names", strings.Join(names, ","), "--want", svc.Spec.ClusterIP)
		if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		defer cs.CoreV1().Pods("kube-system").Delete(ctx, pod.Name, metav1.DeleteOptions{})
		if _, err := kc.WaitPod(ctx, pod.Name, 2*time.Minute, cluster.PodReady); err != nil {
			b.Fatal(err)
		}
	}
	latencies := map[string][]time.Duration{}
	for _, name := range names {
		created := time.Now()
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{tunnelnodes.EdgeNodeLabel: "true", cluster.NodePoolLabel: cluster.EdgePool}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		defer cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		for watcher := range watchers {
			seen, err := waitSeen(ctx, "watch-"+watcher, name, 5*time.Minute)
			if err != nil {
				b.Fatalf("%s: %v", watcher, err)
			}
			latencies[watcher] = append(latencies[watcher], seen.Sub(created))
		}
		b.Logf("%s: yurthosts %s, hosts-file %s", name, latencies["yurthosts"][len(latencies["yurthosts"])-1].Round(time.Millisecond),
			latencies["hosts-file"][len(latencies["hosts-file"])-1].Round(time.Millisecond))
	}
	for watcher, l := range latencies {
		slices.Sort(l)
		p50, p99 := l[len(l)/2], l[len(l)-1] // p99 of 5 samples is the largest
		b.Logf("%s: node added → answered in a pod, n=%d: p50 %s, p99 %s", watcher, len(l), p50.Round(time.Millisecond), p99.Round(time.Millisecond))
		b.ReportMetric(float64(p50.Milliseconds()), watcher+"-p50-ms")
		b.ReportMetric(float64(p99.Milliseconds()), watcher+"-p99-ms")
	}
}

// startUpstreamHostsDNS runs stock CoreDNS (kubeadm's image, its
// ServiceAccount) with corefile and the records ConfigMap mounted as a file
// at /etc/edge/tunnel-nodes, on master-1 behind a Service of its own;
// returns the pod's labels and the Service's ClusterIP.
func startUpstreamHostsDNS(b *testing.B, name, corefile string) (map[string]string, string) {
	ctx := context.Background()
	labels := map[string]string{"app": name}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Data: map[string]string{"Corefile": corefile}}
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.CoreV1().ConfigMaps("kube-system").Delete(ctx, cm.Name, metav1.DeleteOptions{}) })
	stock, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: kc.Master().Name, ServiceAccountName: stock.Spec.Template.Spec.ServiceAccountName, DNSPolicy: corev1.DNSDefault,
			Containers: []corev1.Container{{
				Name: "coredns", Image: stock.Spec.Template.Spec.Containers[0].Image, ImagePullPolicy: corev1.PullNever,
				Args:            []string{"-conf", "/etc/coredns/Corefile"},
				VolumeMounts:    []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns"}, {Name: "edge", MountPath: "/etc/edge"}},
				SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}},
				{Name: "edge", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: tunnelnodes.ConfigMapName},
					Items:                []corev1.KeyToPath{{Key: tunnelnodes.ConfigMapKey, Path: "tunnel-nodes"}}}}},
			},
		},
	}
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.CoreV1().Pods("kube-system").Delete(ctx, pod.Name, metav1.DeleteOptions{}) })
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(53), Protocol: corev1.ProtocolUDP}}}}
	svc, err = cs.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.CoreV1().Services("kube-system").Delete(ctx, svc.Name, metav1.DeleteOptions{}) })
	if _, err := kc.WaitPod(ctx, pod.Name, 2*time.Minute, cluster.PodReady); err != nil {
		b.Fatal(err)
	}
	return labels, svc.Spec.ClusterIP
}

// waitSeen reads the watch-dns pod's log until it reports name, and returns when.
func waitSeen(ctx context.Context, pod, name string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		out, _ := kc.Kubectl(ctx, "-n", "kube-system", "logs", pod)
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == name {
				ns, err := strconv.ParseInt(f[1], 10, 64)
				return time.Unix(0, ns), err
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("%s did not see %s within %s", pod, name, timeout)
}
