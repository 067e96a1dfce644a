package preflight

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const (
	corednsImage = "docker.io/yurtdns/coredns-yurt:v0.1.0"
	syncImage    = "docker.io/yurtdns/tunnel-nodes-sync:v0.1.0"
)

// node is a Node as a kubelet reports it: containerd, kubelet v1.34.2 and
// install's images, edge or not.
func node(name string, edge bool, edit ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{tunnelnodes.EdgeNodeLabel: fmt.Sprint(edge)}},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{ContainerRuntimeVersion: "containerd://1.6.20", KubeletVersion: "v1.34.2"},
			Images:   []corev1.ContainerImage{{Names: []string{corednsImage}}, {Names: []string{"docker.io/yurtdns/tunnel-nodes-sync@sha256:0123", syncImage}}},
		}}
	for _, e := range edit {
		e(n)
	}
	return n
}

func yurthubPod(node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "yurt-hub-" + node, Namespace: tunnelnodes.Namespace}, Spec: corev1.PodSpec{NodeName: node}}
}

// apiserverPod is node's kube-apiserver mirror pod, as kubeadm renders it,
// or with the given of install's edits ("flag", "dnsPolicy").
func apiserverPod(node string, edits ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-" + node, Namespace: tunnelnodes.Namespace,
		Labels: map[string]string{"component": "kube-apiserver", "tier": "control-plane"}},
		Spec: corev1.PodSpec{NodeName: node, DNSPolicy: corev1.DNSClusterFirst, Containers: []corev1.Container{{Name: "kube-apiserver",
			Command: []string{"kube-apiserver", "--advertise-address=192.168.0.10", "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname"}}}}}
	for _, e := range edits {
		switch e {
		case "flag":
			p.Spec.Containers[0].Command[2] = "--kubelet-preferred-address-types=Hostname,InternalIP,ExternalIP"
		case "dnsPolicy":
			p.Spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
		}
	}
	return p
}

// installed are install's kube-apiserver edits.
var installed = []string{"flag", "dnsPolicy"}

func deployment(name string, edit ...func(*appsv1.Deployment)) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tunnelnodes.Namespace}}
	for _, e := range edit {
		e(d)
	}
	return d
}

func recreate(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType }

func versionLabel(v string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) { d.Labels = map[string]string{"app.kubernetes.io/version": v} }
}

// service has the ClusterIP of each family after the primary one.
func service(name, clusterIP string, others ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tunnelnodes.Namespace}, Spec: corev1.ServiceSpec{ClusterIP: clusterIP}}
	if len(others) > 0 {
		s.Spec.ClusterIPs = append([]string{clusterIP}, others...)
	}
	return s
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tunnelnodes.Namespace}, Data: data}
}

// yurtTunnelCluster passes every yurt-tunnel check: a cloud and an edge
// node with yurthub, OpenYurt v1.7.0, the tunnel server on Recreate,
// kubeadm's CoreDNS.
func yurtTunnelCluster() []client.Object {
	return []client.Object{
		node("master-1", false), node("worker-1", true), yurthubPod("worker-1"),
		deployment("yurt-manager", versionLabel("v1.7.0")), deployment("yurt-tunnel-server", recreate),
		service(tunnelnodes.ServiceName, "10.96.0.9"),
		service("kube-dns", "10.96.0.10"), deployment("coredns"), configMap("coredns", map[string]string{"Corefile": "."}),
	}
}

func run(t *testing.T, profile string, objs []client.Object, edit ...func(*engine.Options)) Report {
	t.Helper()
	o := engine.Options{Profile: profile, CoreDNSImage: corednsImage, SyncImage: syncImage}
	for _, e := range edit {
		e(&o)
	}
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(objs...).Build(), Options: o}
	r, err := Run(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func result(r Report, name string) Result {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return Result{}
}

// replace puts obj in place of the object of its type and name in objs;
// with drop, it only takes that object out.
func replace(objs []client.Object, obj client.Object, drop bool) []client.Object {
	var out []client.Object
	for _, o := range objs {
		if fmt.Sprintf("%T", o) == fmt.Sprintf("%T", obj) && o.GetName() == obj.GetName() {
			continue
		}
		out = append(out, o)
	}
	if !drop {
		out = append(out, obj)
	}
	return out
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile string
		objs    []client.Object
		opts    func(*engine.Options)
		check   string
		want    Outcome
		found   []string // each in Found
		action  string   // in Action
		nodes   []string
	}{
		{name: "every yurt-tunnel check passes", objs: yurtTunnelCluster(), want: Pass},
		{name: "CRI-O is untested", check: "container-runtime", want: Warn, nodes: []string{"worker-1"},
			objs:  replace(yurtTunnelCluster(), node("worker-1", true, func(n *corev1.Node) { n.Status.NodeInfo.ContainerRuntimeVersion = "cri-o://1.30.0" }), false),
			found: []string{`worker-1 runs "cri-o://1.30.0"`}, action: "tested on containerd only"},
		{name: "OpenYurt v1.7.0 leaves the node lifecycle controller on", check: "openyurt", objs: yurtTunnelCluster(), want: Pass,
			found: []string{"OpenYurt v1.7.0 (the label app.kubernetes.io/version of Deployment kube-system/yurt-manager)", "install leaves kube-controller-manager's node lifecycle controller on"}},
		{name: "OpenYurt v1.5.0 needs it off", check: "openyurt", want: Pass,
			objs:  replace(yurtTunnelCluster(), deployment("yurt-manager", versionLabel("v1.5.0")), false),
			found: []string{"OpenYurt v1.5.0", "install turns kube-controller-manager's node lifecycle controller off (--controllers=...,-nodelifecycle), as OpenYurt before v1.6 needs"}},
		{name: "--kcm-nodelifecycle disable over v1.7.0", check: "openyurt", want: Pass, objs: yurtTunnelCluster(),
			opts:  func(o *engine.Options) { o.NodeLifecycle = engine.NodeLifecycleDisable },
			found: []string{"off (--controllers=...,-nodelifecycle): --kcm-nodelifecycle disable"}},
		{name: "--kcm-nodelifecycle keep under OpenYurt v1.5.0", check: "openyurt", want: Pass,
			objs:  replace(yurtTunnelCluster(), deployment("yurt-manager", versionLabel("v1.5.0")), false),
			opts:  func(o *engine.Options) { o.NodeLifecycle = engine.NodeLifecycleKeep },
			found: []string{"install leaves kube-controller-manager alone: --kcm-nodelifecycle keep"}},
		{name: "no yurt-manager", check: "openyurt", want: Warn, objs: replace(yurtTunnelCluster(), deployment("yurt-manager"), true),
			found: []string{"no OpenYurt version", "not knowing OpenYurt's version"}, action: "--kcm-nodelifecycle keep"},
		{name: "an edge node without yurthub", check: "yurthub", want: Fail, nodes: []string{"worker-2"},
			objs:  append(yurtTunnelCluster(), node("worker-2", true)),
			found: []string{"no yurthub on edge node(s) worker-2"}, action: "run yurthub there"},
		{name: "a NodePool's node runs yurthub as a service", check: "yurthub", want: Pass,
			objs: append(yurtTunnelCluster(), node("worker-2", true, func(n *corev1.Node) { n.Labels["apps.openyurt.io/nodepool"] = "edge" }))},
		{name: "a cloud node needs no yurthub", check: "yurthub", want: Pass, objs: append(yurtTunnelCluster(), node("master-2", false))},
		{name: "no edge node", check: "yurthub", want: Warn, objs: replace(yurtTunnelCluster(), node("worker-1", false), false)},
		{name: "no tunnel Service", check: "tunnel-service", want: Fail, objs: replace(yurtTunnelCluster(), service(tunnelnodes.ServiceName, ""), true),
			found: []string{"no Service kube-system/x-tunnel-server-internal-svc with a ClusterIP"}, action: "set up yurt-tunnel first"},
		{name: "a headless tunnel Service", check: "tunnel-service", want: Fail, objs: replace(yurtTunnelCluster(), service(tunnelnodes.ServiceName, "None"), false)},
		{name: "a dual-stack tunnel Service", check: "tunnel-service", want: Pass,
			objs:  replace(yurtTunnelCluster(), service(tunnelnodes.ServiceName, "10.96.0.9", "fd00:10:96::9"), false),
			found: []string{"Service kube-system/x-tunnel-server-internal-svc, ClusterIP 10.96.0.9,fd00:10:96::9"}},
		{name: "the tunnel server on RollingUpdate", check: "tunnel-server-strategy", want: Fail,
			objs: replace(yurtTunnelCluster(), deployment("yurt-tunnel-server", func(d *appsv1.Deployment) {
				d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
			}), false),
			found:  []string{"has strategy RollingUpdate", "install stops at tunnel-dns"},
			action: `kubectl -n kube-system patch deployment yurt-tunnel-server --type=merge -p '{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}' (or install --skip tunnel-dns)`},
		{name: "no tunnel server", check: "tunnel-server-strategy", want: Warn, objs: replace(yurtTunnelCluster(), deployment("yurt-tunnel-server"), true),
			found: []string{"install skips tunnel-dns"}},
		{name: "an edge kubelet 1.35", check: "edge-kubelet-watch-list", want: Warn, nodes: []string{"worker-1"},
			objs:  replace(yurtTunnelCluster(), node("worker-1", true, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.35.0" }), false),
			found: []string{"edge kubelet(s) 1.35.0 or later: worker-1 v1.35.0"}, action: "featureGates: {WatchListClient: false}"},
		{name: "a cloud kubelet 1.37 is not behind yurthub", check: "edge-kubelet-watch-list", want: Pass,
			objs: replace(yurtTunnelCluster(), node("master-1", false, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.37.1" }), false)},
		{name: "a node without the images", check: "images", want: Fail, nodes: []string{"worker-2"},
			objs:   append(yurtTunnelCluster(), node("worker-2", true, func(n *corev1.Node) { n.Status.Images = nil }), yurthubPod("worker-2")),
			found:  []string{corednsImage + " missing on worker-2; " + syncImage + " missing on worker-2"},
			action: "on each such node: ctr -n k8s.io images import --all-platforms coredns-yurt.oci.tar and ctr -n k8s.io images import --all-platforms tunnel-nodes-sync.oci.tar"},
		{name: "a short name is found under docker.io", check: "images", want: Pass, objs: yurtTunnelCluster(),
			opts: func(o *engine.Options) { o.CoreDNSImage = "yurtdns/coredns-yurt:v0.1.0" }},
		{name: "another tag is missing", check: "images", want: Fail, nodes: []string{"master-1", "worker-1"}, objs: yurtTunnelCluster(),
			opts:  func(o *engine.Options) { o.SyncImage = "docker.io/yurtdns/tunnel-nodes-sync:v0.2.0" },
			found: []string{"docker.io/yurtdns/tunnel-nodes-sync:v0.2.0 missing on master-1, worker-1"}, action: "tunnel-nodes-sync.oci.tar"},
		{name: "a node listing 50 images may hold it unlisted", check: "images", want: Warn, nodes: []string{"worker-1"},
			objs: replace(yurtTunnelCluster(), node("worker-1", true, func(n *corev1.Node) {
				n.Status.Images = nil
				for i := range maxStatusImages {
					n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("registry.local/big:%d", i)}})
				}
			}), false),
			found: []string{"worker-1 list 50 or more images"}, action: "crictl images"},
		{name: "no kubeadm CoreDNS", check: "kubeadm-dns", want: Fail,
			objs:  replace(replace(yurtTunnelCluster(), service("kube-dns", ""), true), deployment("coredns"), true),
			found: []string{"no Service kube-system/kube-dns, no Deployment kube-system/coredns"}},
		{name: "Raven's layout under yurt-tunnel hints", check: "profile", want: Warn,
			objs:  append(replace(yurtTunnelCluster(), service(tunnelnodes.ServiceName, ""), true), configMap(tunnelnodes.RavenGlobalConfigName, nil)),
			found: []string{"did you mean --profile raven?"}},
		{name: "three control planes with install's edits", check: "control-planes-alike", want: Pass,
			objs:  append(yurtTunnelCluster(), apiserverPod("master-1", installed...), apiserverPod("master-2", installed...), apiserverPod("master-3", installed...)),
			found: []string{"the kube-apiserver of every control-plane node (3) has install's edits"}},
		{name: "three control planes before install", check: "control-planes-alike", want: Pass,
			objs:  append(yurtTunnelCluster(), apiserverPod("master-1"), apiserverPod("master-2"), apiserverPod("master-3")),
			found: []string{"none of the 3 control-plane nodes' kube-apiserver has install's edits"}},
		{name: "master-2 rendered again by a plain kubeadm upgrade", check: "control-planes-alike", want: Fail, nodes: []string{"master-2"},
			objs: append(yurtTunnelCluster(), apiserverPod("master-1", installed...), apiserverPod("master-2"), apiserverPod("master-3", installed...)),
			found: []string{"kube-apiserver-master-2 lacks install's edits (runs --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname, dnsPolicy ClusterFirst) " +
				"while master-1, master-3 have them"},
			action: "a kubeadm upgrade without --patches rendered the static pods on master-2 again: run install --control-plane-jobs again"},
		{name: "master-2 kept the flag from kubeadm-config but not dnsPolicy", check: "control-planes-alike", want: Fail, nodes: []string{"master-2"},
			objs:   append(yurtTunnelCluster(), apiserverPod("master-1", installed...), apiserverPod("master-2", "flag"), apiserverPod("master-3", installed...)),
			found:  []string{"kube-apiserver-master-2 lacks install's edits (runs dnsPolicy ClusterFirst) while master-1, master-3 have them"},
			action: "give kubeadm upgrade --patches with install's kubeadm patches directory"},
		{name: "two of three lacking", check: "control-planes-alike", want: Fail, nodes: []string{"master-2", "master-3"},
			objs: append(yurtTunnelCluster(), apiserverPod("master-1", installed...), apiserverPod("master-2"), apiserverPod("master-3", "flag")),
			found: []string{"kube-apiserver-master-2 lacks install's edits (runs --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname, dnsPolicy ClusterFirst); " +
				"kube-apiserver-master-3 lacks install's edits (runs dnsPolicy ClusterFirst) while master-1 has them"},
			action: "on master-2, master-3 again"},
		{name: "one control plane", check: "control-planes-alike", want: Pass, objs: append(yurtTunnelCluster(), apiserverPod("master-1")),
			found: []string{"one control-plane node (master-1): nothing to compare"}},
		{name: "no control-plane node found", check: "control-planes-alike", want: Pass, objs: yurtTunnelCluster(),
			found: []string{"no control-plane node found"}},
		{name: "every Raven check passes", profile: layout.Raven, objs: ravenCluster(), want: Pass},
		{name: "Raven without raven-proxy-dns", profile: layout.Raven, check: "profile", want: Fail,
			objs:  replace(ravenCluster(), deployment(tunnelnodes.RavenProxyDNSName), true),
			found: []string{"no Deployment kube-system/raven-proxy-dns"}},
		{name: "Raven without its proxy Service", profile: layout.Raven, check: "tunnel-service", want: Fail,
			objs:  replace(ravenCluster(), service(tunnelnodes.RavenServiceName, ""), true),
			found: []string{"no Service kube-system/x-raven-proxy-internal-svc"}, action: "set up Raven's L7 proxy first"},
		{name: "Raven with its proxy off", profile: layout.Raven, check: "tunnel-service", want: Warn,
			objs:  replace(ravenCluster(), configMap(tunnelnodes.RavenGlobalConfigName, map[string]string{tunnelnodes.RavenEnableProxyKey: "false"}), false),
			found: []string{"maps no node name to it"}, action: `set enable-l7-proxy: "true" in ConfigMap kube-system/raven-cfg`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var edits []func(*engine.Options)
			if tc.opts != nil {
				edits = append(edits, tc.opts)
			}
			r := run(t, tc.profile, tc.objs, edits...)
			if tc.check == "" {
				if r.Result != tc.want {
					t.Errorf("result %s, want %s:\n%s", r.Result, tc.want, lines(r))
				}
				return
			}
			got := result(r, tc.check)
			if got.Outcome != tc.want || got.Found == "" || (tc.want != Pass && got.Action == "") || fmt.Sprint(got.Nodes) != fmt.Sprint(tc.nodes) ||
				!strings.Contains(got.Action, tc.action) {
				t.Errorf("%s: %+v, want %s, nodes %v, action with %q", tc.check, got, tc.want, tc.nodes, tc.action)
			}
			for _, f := range tc.found {
				if !strings.Contains(got.Found, f) {
					t.Errorf("%s found %q, want it to say %q", tc.check, got.Found, f)
				}
			}
			if tc.want == Fail && r.Result != Fail {
				t.Errorf("a failed check, but the report's result is %s", r.Result)
			}
		})
	}
}

// ravenCluster passes every Raven check.
func ravenCluster() []client.Object {
	return []client.Object{
		node("master-1", false), node("worker-1", true), yurthubPod("worker-1"), deployment("yurt-manager", versionLabel("v1.7.0")),
		configMap(tunnelnodes.RavenGlobalConfigName, map[string]string{tunnelnodes.RavenEnableProxyKey: "true"}),
		deployment(tunnelnodes.RavenProxyDNSName), service(tunnelnodes.RavenServiceName, "10.96.100.7"),
	}
}

func lines(r Report) string {
	var out []string
	for _, c := range r.Checks {
		out = append(out, c.Line())
	}
	return strings.Join(out, "\n")
}

// The lines as check prints them, and the report's result: the worst.
func TestLinesAndResult(t *testing.T) {
	r := run(t, "", append(yurtTunnelCluster(), node("worker-2", true, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = "v1.35.1" })))
	text := lines(r)
	for _, want := range []string{
		"✔ container-runtime: containerd on every node (3)\n",
		"✖ yurthub: no yurthub on edge node(s) worker-2 (no mirror pod kube-system/yurt-hub-<node>, not in a NodePool) — run yurthub there",
		"⚠ edge-kubelet-watch-list: edge kubelet(s) 1.35.0 or later: worker-2 v1.35.1;",
	} {
		if !strings.Contains(text+"\n", want) {
			t.Errorf("the lines lack %q:\n%s", want, text)
		}
	}
	if r.Result != Fail || r.Profile != layout.YurtTunnel {
		t.Errorf("report: profile %s, result %s, want yurt-tunnel and fail", r.Profile, r.Result)
	}
}

func TestNodeNames(t *testing.T) {
	var names []string
	for i := range 12 {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	if got, want := nodeNames(names), "n0, n1, n2, n3, n4, n5, n6, n7, n8, n9 and 2 more"; got != want {
		t.Errorf("nodeNames = %q, want %q", got, want)
	}
}

func TestArchive(t *testing.T) {
	for img, want := range map[string]string{
		"docker.io/yurtdns/coredns-yurt:v0.1.0":           "coredns-yurt.oci.tar",
		"registry.local:5000/yurtdns/coredns-yurt":        "coredns-yurt.oci.tar",
		"registry.local:5000/tunnel-nodes-sync@sha256:ab": "tunnel-nodes-sync.oci.tar",
	} {
		if got := archive(img); got != want {
			t.Errorf("archive(%q) = %q, want %q", img, got, want)
		}
	}
}
