package steps

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Revert refuses exactly while a running pod's resolv.conf names the
// node-local address: made on a switched node between the switch and the
// restore, with a DNS policy that takes the kubelet's clusterDNS.
func TestRefuseWhileResolvingThere(t *testing.T) {
	since := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	until := since.Add(time.Hour)
	pod := func(name, node string, created time.Time, edit func(*corev1.Pod)) client.Object {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.Time{Time: created}},
			Spec: corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	during := since.Add(time.Minute)
	for _, tc := range []struct {
		name    string
		pod     client.Object
		refused bool
	}{
		{"made during, ClusterFirst", pod("a", "worker-1", during, nil), true},
		{"made during, empty policy (ClusterFirst)", pod("a", "worker-1", during, func(p *corev1.Pod) { p.Spec.DNSPolicy = "" }), true},
		{"made during, host network with ClusterFirstWithHostNet", pod("a", "worker-1", during, func(p *corev1.Pod) {
			p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
		}), true},
		{"made during, host network with ClusterFirst (the node's resolv.conf)", pod("a", "worker-1", during, func(p *corev1.Pod) { p.Spec.HostNetwork = true }), false},
		{"made during, dnsPolicy Default", pod("a", "worker-1", during, func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }), false},
		{"made during, finished", pod("a", "worker-1", during, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
		{"made before the switch", pod("a", "worker-1", since.Add(-time.Second), nil), false},
		{"made before the switch, its sandbox made again during (the node rebooted)", pod("a", "worker-1", since.Add(-time.Hour), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: during}}}
		}), true},
		{"made before the switch, its sandbox made again after the restore", pod("a", "worker-1", since.Add(-time.Hour), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: until.Add(time.Second)}}}
		}), false},
		{"a mirror pod made before the switch, its kubelet restarted during", pod("a", "worker-1", since.Add(-time.Hour), func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
			p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: during}}}
		}), false},
		{"made before the switch, sandbox not ready since during", pod("a", "worker-1", since.Add(-time.Hour), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Time{Time: during}}}
		}), false},
		{"made after the restore", pod("a", "worker-1", until.Add(time.Second), nil), false},
		{"made during, a pod of the sync Deployment (revert deletes it)", pod("a", "worker-1", during, func(p *corev1.Pod) {
			p.Namespace = "kube-system"
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "tunnel-nodes-sync-68d8c98454", UID: "u", Controller: new(true)}}
		}), false},
		{"made during, another Deployment's pod", pod("a", "worker-1", during, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-68d8c98454", UID: "u", Controller: new(true)}}
		}), true},
		{"made during, on a node never switched", pod("a", "master-1", during, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(tc.pod).Build()}
			ss := &engine.StepState{Records: map[string]engine.Record{
				kubeletRecordKey("worker-1"): {Kubelet: &engine.KubeletRecord{Node: "worker-1", Since: &metav1.Time{Time: since}, Until: &metav1.Time{Time: until}}}}}
			err := refuseWhileResolvingThere(context.Background(), env, ss)
			if refused := err != nil; refused != tc.refused {
				t.Fatalf("refused %v (%v), want %v", refused, err, tc.refused)
			}
			if tc.refused && !strings.Contains(err.Error(), "default/a") {
				t.Errorf("the refusal does not name the pod: %v", err)
			}
		})
	}
}

// The node-local Corefile reads the profile's records: yurt-tunnel's as
// deploy/ has it, Raven's with its ConfigMap and proxy Service; it answers
// the cluster's zones with the cluster CoreDNS's kubernetes directive, and
// waits for its sync before serving (a surge pod is asked before it is Ready); the
// DaemonSet runs as the profile's DNS ServiceAccount with install's images.
func TestNodeLocalObjectsFollowProfile(t *testing.T) {
	stock := &corev1.ConfigMap{}
	kubeadmObject(t, "coredns.yaml", "ConfigMap", stock)
	stock.Data["Corefile"] = strings.Replace(stock.Data["Corefile"], "ttl 30", "ttl 7", 1)
	const kubernetes = "kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 7\n       startup_timeout 30s\n    }"

	for _, tc := range []struct {
		profile, want, sa string
	}{
		{layout.YurtTunnel, "yurthosts {\n        shards yurtdns-records\n        fallthrough\n    }", "coredns"},
		{layout.Raven, "yurthosts {\n        configmap kube-system/edge-tunnel-nodes\n        service kube-system/x-raven-proxy-internal-svc\n        shards yurtdns-records\n        fallthrough\n    }", "raven-proxy-dns"},
	} {
		p, err := layout.Named(tc.profile)
		if err != nil {
			t.Fatal(err)
		}
		env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(stock.DeepCopy()).Build(),
			Options: engine.Options{CoreDNSImage: "example.org/c:1", SyncImage: "example.org/s:1"}}
		objs, err := nodeLocalObjects(context.Background(), env, p)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]bool{}
		for _, o := range objs {
			kinds[o.GetKind()] = true
			switch o.GetKind() {
			case "ConfigMap":
				corefile := o.Object["data"].(map[string]any)["Corefile"].(string)
				if !strings.Contains(corefile, tc.want) || !strings.Contains(corefile, "bind 169.254.20.10") || !strings.Contains(corefile, kubernetes) {
					t.Errorf("%s: Corefile:\n%s\nwant %s and the cluster's %s", tc.profile, corefile, tc.want, kubernetes)
				}
			case "ClusterRoleBinding":
				if sub := o.Object["subjects"].([]any)[0].(map[string]any); sub["name"] != tc.sa || sub["namespace"] != "kube-system" {
					t.Errorf("%s: the kubernetes plugin's grant goes to %v/%v, want kube-system/%s", tc.profile, sub["namespace"], sub["name"], tc.sa)
				}
			case "DaemonSet":
				spec := o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
				init := spec["initContainers"].([]any)[0].(map[string]any)["image"]
				main := spec["containers"].([]any)[0].(map[string]any)["image"]
				if spec["serviceAccountName"] != tc.sa || init != "example.org/s:1" || main != "example.org/c:1" {
					t.Errorf("%s: ServiceAccount %v, images %v %v", tc.profile, spec["serviceAccountName"], init, main)
				}
			}
		}
		if !kinds["ConfigMap"] || !kinds["DaemonSet"] || !kinds["Service"] || !kinds["ClusterRole"] || !kinds["ClusterRoleBinding"] {
			t.Errorf("deploy/%s renders %v", deploy.NodeLocalDNS, kinds)
		}
	}
}

// Revert tears down a node's address only where a kubelet started the
// cache pod's setup.
func TestSetupStarted(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	for _, tc := range []struct {
		name    string
		node    string
		init    []corev1.ContainerStatus
		started bool
	}{
		{"bound, never started by its kubelet", "edge-1", nil, false},
		{"not bound yet", "", nil, false},
		{"setup waiting", "edge-1", []corev1.ContainerStatus{{Name: "setup", State: waiting}}, false},
		{"setup running", "edge-1", []corev1.ContainerStatus{{Name: "setup", State: running}}, true},
		{"setup done", "edge-1", []corev1.ContainerStatus{{Name: "setup", State: done}}, true},
		{"setup waiting after a run", "edge-1", []corev1.ContainerStatus{{Name: "setup", State: waiting, LastTerminationState: done}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: tc.node}, Status: corev1.PodStatus{InitContainerStatuses: tc.init}}
			if got := setupStarted(p); got != tc.started {
				t.Errorf("setupStarted = %v, want %v", got, tc.started)
			}
		})
	}
}

// Status warns about an edge kubelet that would start no pod after a
// restart while cut off: 1.35 and later, behind yurthub, watch-list on.
func TestWatchListsBehindYurthub(t *testing.T) {
	node := func(edge, version string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"openyurt.io/is-edge-worker": edge}},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: version}}}
	}
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		gates map[string]bool
		want  bool
	}{
		{"edge, 1.37, default gates", node("true", "v1.37.1"), nil, true},
		{"edge, 1.35.0, gate on", node("true", "v1.35.0"), map[string]bool{"WatchListClient": true}, true},
		{"edge, 1.37, gate off", node("true", "v1.37.1"), map[string]bool{"WatchListClient": false}, false},
		{"edge, 1.34 (lists)", node("true", "v1.34.2"), nil, false},
		{"cloud node", node("false", "v1.37.1"), nil, false},
		{"version unreadable", node("true", "unknown"), nil, false},
	} {
		if got := watchListsBehindYurthub(tc.node, tc.gates); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
