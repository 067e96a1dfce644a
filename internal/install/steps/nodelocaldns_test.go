package steps

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/internal/nodelocal/leftover"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Revert leaves a forwarder for the pods that resolve at the node-local
// address (leftover.Strands, tested there) on nodes with a window, but not
// for those revert itself makes anew.
func TestStrandedPods(t *testing.T) {
	since := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	during := since.Add(time.Minute)
	pod := func(name, node string, edit func(*corev1.Pod)) client.Object {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", CreationTimestamp: metav1.Time{Time: during}},
			Spec: corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(
		pod("web", "worker-1", nil),
		pod("on-a-node-never-switched", "master-1", nil),
		pod("tunnel-nodes-sync-68d8c98454-x", "worker-1", func(p *corev1.Pod) {
			p.Namespace = "kube-system"
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "tunnel-nodes-sync-68d8c98454", UID: "u", Controller: new(true)}}
		}),
		pod("kube-apiserver-worker-1", "worker-1", func(p *corev1.Pod) {
			p.Namespace, p.Labels = "kube-system", map[string]string{"component": "kube-apiserver"}
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
			p.Spec.HostNetwork, p.Spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
		}),
	).Build()}
	ss := &engine.StepState{Records: map[string]engine.Record{
		kubeletRecordKey("worker-1"): {Kubelet: &engine.KubeletRecord{Node: "worker-1", Since: &metav1.Time{Time: since}, Until: &metav1.Time{Time: since.Add(time.Hour)}}},
		kubeletRecordKey("master-1"): {Kubelet: &engine.KubeletRecord{Node: "master-1"}}}}
	stranded, err := strandedPods(context.Background(), env, kubeletWindows(ss))
	if err != nil {
		t.Fatal(err)
	}
	if len(stranded) != 1 || !slices.Equal(stranded["worker-1"], []string{"default/web"}) {
		t.Errorf("stranded = %v, want worker-1: default/web", stranded)
	}
}

// The leftover runs the caches' images on the lingering nodes only, with
// their windows, a forward-only Corefile beside the cache's ports, and the
// ClusterRole first (it owns the rest).
func TestLeftoverObjects(t *testing.T) {
	cache := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-local-dns", Namespace: "kube-system"}, Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "setup", Image: "example.org/s:1"}}, Containers: []corev1.Container{{Name: "coredns", Image: "example.org/c:1"}}}}}}
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(cache).Build(), Options: engine.Options{SyncImage: "example.org/other:1"}}
	images, err := leftoverImages(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	w := leftover.Window{Since: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC)}
	objs, err := leftoverObjects(images, map[string]leftover.Window{"worker-1": w, "master-1": w}, []netip.Addr{nodelocal.Address})
	if err != nil {
		t.Fatal(err)
	}
	if objs[0].GetKind() != "ClusterRole" || objs[0].GetName() != leftover.ClusterRole {
		t.Errorf("first object %s %s, want ClusterRole %s", objs[0].GetKind(), objs[0].GetName(), leftover.ClusterRole)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
		switch o.GetKind() {
		case "ConfigMap":
			data := o.Object["data"].(map[string]any)
			corefile := data[leftover.CorefileKey].(string)
			for _, want := range []string{"bind 169.254.20.10", "health 169.254.20.10:8082", "ready 169.254.20.10:8183", "cache 30", "forward . {$KUBE_DNS_SERVICE_HOST}"} {
				if !strings.Contains(corefile, want) {
					t.Errorf("Corefile does not say %q:\n%s", want, corefile)
				}
			}
			for _, absent := range []string{"yurthosts", "kubernetes", ":8080", ":8181", "prometheus"} {
				if strings.Contains(corefile, absent) {
					t.Errorf("Corefile says %q:\n%s", absent, corefile)
				}
			}
			if data["worker-1"] != w.Encode() || data["master-1"] != w.Encode() || len(data) != 3 {
				t.Errorf("ConfigMap data %v", data)
			}
		case "DaemonSet":
			ds := &appsv1.DaemonSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
				t.Fatal(err)
			}
			spec := ds.Spec.Template.Spec
			terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			// One term per node: a metadata.name field selector takes one value.
			if len(terms) != 2 || !slices.Equal(terms[0].MatchFields[0].Values, []string{"master-1"}) || !slices.Equal(terms[1].MatchFields[0].Values, []string{"worker-1"}) ||
				terms[0].MatchFields[0].Key != "metadata.name" || terms[1].MatchFields[0].Key != "metadata.name" {
				t.Errorf("node affinity %+v, want metadata.name in master-1, or in worker-1", terms)
			}
			for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
				want := map[string]string{"setup": "example.org/s:1", "linger": "example.org/s:1", "coredns": "example.org/c:1"}[c.Name]
				if c.Image != want || len(c.Ports) > 0 {
					t.Errorf("container %s: image %s (want %s), ports %v", c.Name, c.Image, want, c.Ports)
				}
			}
			if !spec.HostNetwork || spec.ServiceAccountName != leftover.Name {
				t.Errorf("hostNetwork %v, ServiceAccount %s", spec.HostNetwork, spec.ServiceAccountName)
			}
		}
	}
	for _, k := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount", "ConfigMap", "DaemonSet"} {
		if !kinds[k] {
			t.Errorf("no %s in deploy/%s", k, deploy.NodeLocalDNSLeftover)
		}
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
		profile, want, sa, nodesRead string
	}{
		{layout.YurtTunnel, "yurthosts {\n        shards yurtdns-records\n        yurthub http://169.254.2.1:10261\n        fallthrough\n    }", "coredns",
			"configmaps/yurt-tunnel-nodes services/x-tunnel-server-internal-svc"},
		{layout.Raven, "yurthosts {\n        configmap kube-system/edge-tunnel-nodes\n        service kube-system/x-raven-proxy-internal-svc\n        shards yurtdns-records\n        yurthub http://169.254.2.1:10261\n        fallthrough\n    }", "raven-proxy-dns",
			"configmaps/edge-tunnel-nodes services/x-raven-proxy-internal-svc"},
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
		kinds, bound := map[string]bool{}, map[string]bool{}
		for _, o := range objs {
			kinds[o.GetKind()] = true
			switch o.GetKind() {
			case "ConfigMap":
				corefile := o.Object["data"].(map[string]any)["Corefile"].(string)
				if !strings.Contains(corefile, tc.want) || !strings.Contains(corefile, "bind 169.254.20.10") || !strings.Contains(corefile, kubernetes) {
					t.Errorf("%s: Corefile:\n%s\nwant %s and the cluster's %s", tc.profile, corefile, tc.want, kubernetes)
				}
			case "Role":
				var read []string
				for _, r := range o.Object["rules"].([]any) {
					rule := r.(map[string]any)
					read = append(read, fmt.Sprintf("%s/%s", rule["resources"].([]any)[0], strings.Join(toStrings(rule["resourceNames"].([]any)), ",")))
				}
				if got := strings.Join(read, " "); got != tc.nodesRead {
					t.Errorf("%s: the nodes may read %s, want %s", tc.profile, got, tc.nodesRead)
				}
			case "RoleBinding":
				sub := o.Object["subjects"].([]any)[0].(map[string]any)
				if sub["kind"] != "Group" || sub["name"] != "system:nodes" {
					t.Errorf("%s: RoleBinding %s/%s binds %v, want the group system:nodes", tc.profile, o.GetNamespace(), o.GetName(), sub)
				}
				bound[o.GetNamespace()+"/"+o.Object["roleRef"].(map[string]any)["name"].(string)] = true
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
		if !bound["kube-system/yurtdns:node-local-dns-records"] {
			t.Errorf("%s: the nodes are bound to %v, want the records' Role", tc.profile, bound)
		}
	}
}

func toStrings(list []any) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = fmt.Sprint(v)
	}
	return out
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
