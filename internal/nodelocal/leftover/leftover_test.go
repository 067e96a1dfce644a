package leftover

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	since  = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	until  = since.Add(time.Hour)
	during = since.Add(time.Minute)
)

func pod(name, node string, created time.Time, edit func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.Time{Time: created}},
		Spec: corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if edit != nil {
		edit(&p)
	}
	return p
}

// A pod strands exactly while its resolv.conf names the node-local address:
// made (its sandbox) between the switch and the restore, with a DNS policy
// that takes the kubelet's clusterDNS, and not finished.
func TestStrands(t *testing.T) {
	sandbox := func(at time.Time, status corev1.ConditionStatus) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: status, LastTransitionTime: metav1.Time{Time: at}}}
		}
	}
	for _, tc := range []struct {
		name   string
		pod    corev1.Pod
		window Window
		want   bool
	}{
		{"made during, ClusterFirst", pod("a", "worker-1", during, nil), Window{since, until}, true},
		{"made during, empty policy (ClusterFirst)", pod("a", "worker-1", during, func(p *corev1.Pod) { p.Spec.DNSPolicy = "" }), Window{since, until}, true},
		{"made during, host network with ClusterFirstWithHostNet", pod("a", "worker-1", during, func(p *corev1.Pod) {
			p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
		}), Window{since, until}, true},
		{"made during, host network with ClusterFirst (the node's resolv.conf)", pod("a", "worker-1", during, func(p *corev1.Pod) { p.Spec.HostNetwork = true }), Window{since, until}, false},
		{"made during, dnsPolicy Default", pod("a", "worker-1", during, func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }), Window{since, until}, false},
		{"made during, succeeded", pod("a", "worker-1", during, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), Window{since, until}, false},
		{"made during, failed", pod("a", "worker-1", during, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), Window{since, until}, false},
		{"made during, the node still switched", pod("a", "worker-1", until.Add(time.Hour), nil), Window{Since: since}, true},
		{"made before the switch", pod("a", "worker-1", since.Add(-time.Second), nil), Window{since, until}, false},
		{"made at the switch", pod("a", "worker-1", since, nil), Window{since, until}, true},
		{"made at the restore", pod("a", "worker-1", until, nil), Window{since, until}, false},
		{"made before, its sandbox made again during (the node rebooted)", pod("a", "worker-1", since.Add(-time.Hour), sandbox(during, corev1.ConditionTrue)), Window{since, until}, true},
		{"made before, its sandbox made again after the restore", pod("a", "worker-1", since.Add(-time.Hour), sandbox(until.Add(time.Second), corev1.ConditionTrue)), Window{since, until}, false},
		{"made during, its sandbox made again after the restore", pod("a", "worker-1", during, sandbox(until.Add(time.Second), corev1.ConditionTrue)), Window{since, until}, false},
		{"made before, sandbox not ready since during", pod("a", "worker-1", since.Add(-time.Hour), sandbox(during, corev1.ConditionFalse)), Window{since, until}, false},
		{"a mirror pod made before, its kubelet restarted during", pod("a", "worker-1", since.Add(-time.Hour), func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
			p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
			sandbox(during, corev1.ConditionTrue)(p)
		}), Window{since, until}, false},
		{"made after the restore", pod("a", "worker-1", until.Add(time.Second), nil), Window{since, until}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.window.Strands(&tc.pod); got != tc.want {
				t.Errorf("Strands = %v, want %v", got, tc.want)
			}
		})
	}
}

// The linger serves while a pod on its node strands, leaves the address to
// a cache that runs there again, and otherwise tears the node down, also a
// node no longer listed (its leftover pod's setup may have put the address
// back after a reboot).
func TestDecide(t *testing.T) {
	windows := map[string]Window{"worker-1": {since, until}, "worker-2": {since, until}}
	stranding := pod("a", "worker-1", during, nil)
	cache := pod("node-local-dns-x", "worker-1", until.Add(time.Hour), func(p *corev1.Pod) {
		p.Namespace, p.Labels = "kube-system", map[string]string{AppLabel: CacheApp}
		p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSDefault
	})
	ownPod := pod("node-local-dns-leftover-x", "worker-1", until.Add(time.Minute), func(p *corev1.Pod) {
		p.Namespace, p.Labels = "kube-system", map[string]string{AppLabel: App}
		p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSDefault
	})
	for _, tc := range []struct {
		name     string
		windows  map[string]Window
		node     string
		pods     []corev1.Pod
		want     Action
		stranded int
	}{
		{"a pod strands", windows, "worker-1", []corev1.Pod{ownPod, stranding}, Serve, 1},
		{"a pod strands, a cache is back too", windows, "worker-1", []corev1.Pod{stranding, cache}, Serve, 1},
		{"only its own pod left", windows, "worker-1", []corev1.Pod{ownPod}, TearDown, 0},
		{"a pod made after the restore", windows, "worker-1", []corev1.Pod{ownPod, pod("b", "worker-1", until.Add(time.Minute), nil)}, TearDown, 0},
		{"the stranding pod is on another node", windows, "worker-2", []corev1.Pod{stranding}, TearDown, 0},
		{"a cache runs there again", windows, "worker-1", []corev1.Pod{ownPod, cache}, Yield, 0},
		{"not listed any more", map[string]Window{"worker-2": {since, until}}, "worker-1", []corev1.Pod{ownPod, stranding}, TearDown, 0},
		{"not listed any more, a cache runs there", map[string]Window{}, "worker-1", []corev1.Pod{cache}, Yield, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, stranded := Decide(tc.windows, tc.node, tc.pods)
			if got != tc.want || len(stranded) != tc.stranded {
				t.Errorf("Decide = %v %v, want %v with %d stranded", got, stranded, tc.want, tc.stranded)
			}
		})
	}
}

// The ConfigMap's node entries read back as written; the Corefile is no node.
func TestWindows(t *testing.T) {
	data := map[string]string{CorefileKey: ".:53 {}", "worker-1": Window{since, until}.Encode(), "master-1": Window{Since: since}.Encode()}
	if want := `{"since":"2026-11-25T12:00:00Z","until":"2026-11-25T13:00:00Z"}`; data["worker-1"] != want {
		t.Errorf("encoded %s, want %s", data["worker-1"], want)
	}
	got, err := Windows(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["worker-1"] != (Window{since, until}) || got["master-1"] != (Window{Since: since}) {
		t.Errorf("Windows = %v", got)
	}
	if _, err := Windows(map[string]string{"worker-1": "yesterday"}); err == nil {
		t.Error("a garbled entry reads without an error")
	}
}
