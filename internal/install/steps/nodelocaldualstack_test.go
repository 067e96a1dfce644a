package steps

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

var (
	dualStack  = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	ipv6Single = []corev1.IPFamily{corev1.IPv6Protocol}
)

// upstreamService is kube-dns-upstream as an apiserver leaves it once this
// version applied it.
func upstreamService(families []corev1.IPFamily) *corev1.Service {
	policy := corev1.IPFamilyPolicyPreferDualStack
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: kubeDNSUpstream, Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{IPFamilyPolicy: &policy, IPFamilies: families}}
}

// deploy/node-local-dns asks for a kube-dns-upstream of both families.
func TestUpstreamServicePrefersDualStack(t *testing.T) {
	objs, err := deploy.Render(deploy.NodeLocalDNS)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetName() == kubeDNSUpstream {
			if p := o.Object["spec"].(map[string]any)["ipFamilyPolicy"]; p != "PreferDualStack" {
				t.Errorf("ipFamilyPolicy %v, want PreferDualStack", p)
			}
			return
		}
	}
	t.Errorf("deploy/%s has no Service %s", deploy.NodeLocalDNS, kubeDNSUpstream)
}

// The caches' addresses follow kube-dns-upstream's families, the primary
// first; with no families known the IPv4 address alone. The fake client's
// dry-run apply allocates no families, so over an earlier install's
// SingleStack Service the live one's count here; a real dual-stack
// apiserver gives the applied PreferDualStack Service both (the real
// cluster's TestKubeadmUpgrade installs over v0.1.0's).
func TestNodeLocalAddrsFollowUpstreamService(t *testing.T) {
	single := corev1.IPFamilyPolicySingleStack
	earlier := upstreamService(dualStack[:1])
	earlier.Spec.IPFamilyPolicy = &single
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want string
	}{
		{"no Service yet", nil, "169.254.20.10"},
		{"IPv4", upstreamService(dualStack[:1]), "169.254.20.10"},
		{"dual-stack", upstreamService(dualStack), "169.254.20.10,fd84:5bd1:ae3::10"},
		{"dual-stack, IPv6 primary", upstreamService([]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}), "fd84:5bd1:ae3::10,169.254.20.10"},
		{"IPv6", upstreamService(ipv6Single), "fd84:5bd1:ae3::10"},
		{"an earlier install's single-stack Service", earlier, "169.254.20.10"},
	} {
		b := fake.NewClientBuilder()
		if tc.svc != nil {
			b = b.WithObjects(tc.svc)
		}
		addrs, err := nodeLocalAddrs(context.Background(), &engine.Env{Client: b.Build()})
		if err != nil || addrList(addrs) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.name, addrList(addrs), err, tc.want)
		}
	}
}

// On a dual-stack cluster the cache binds both addresses, health and ready
// on the first; its setup puts both on lo; its probes ask the first. IPv6
// first: in brackets where a port follows.
func TestNodeLocalObjectsDualStack(t *testing.T) {
	p, err := layout.Named(layout.YurtTunnel)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		families           []corev1.IPFamily
		bind, health, host string
		args               []string
	}{
		{dualStack, "bind 169.254.20.10 fd84:5bd1:ae3::10\n", "health 169.254.20.10:8080\n    ready 169.254.20.10:8181\n", "169.254.20.10",
			[]string{"node-local-dns", "setup", "--address", "169.254.20.10", "--address", "fd84:5bd1:ae3::10", "--interface", "lo"}},
		{ipv6Single, "bind fd84:5bd1:ae3::10\n", "health [fd84:5bd1:ae3::10]:8080\n    ready [fd84:5bd1:ae3::10]:8181\n", "fd84:5bd1:ae3::10",
			[]string{"node-local-dns", "setup", "--address", "fd84:5bd1:ae3::10", "--interface", "lo"}},
	} {
		env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(upstreamService(tc.families)).Build(),
			Options: engine.Options{CoreDNSImage: "example.org/c:1", SyncImage: "example.org/s:1"}}
		objs, err := nodeLocalObjects(context.Background(), env, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			switch o.GetKind() {
			case "ConfigMap":
				corefile := o.Object["data"].(map[string]any)["Corefile"].(string)
				if !strings.Contains(corefile, tc.bind+"    "+tc.health) || strings.Contains(corefile, "169.254.20.10:") && tc.host != "169.254.20.10" {
					t.Errorf("%v: Corefile:\n%s\nwant %q then %q", tc.families, corefile, tc.bind, tc.health)
				}
			case "DaemonSet":
				ds := &appsv1.DaemonSet{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
					t.Fatal(err)
				}
				spec := ds.Spec.Template.Spec
				if got := spec.InitContainers[0].Args; !slices.Equal(got, tc.args) {
					t.Errorf("%v: setup args %q, want %q", tc.families, got, tc.args)
				}
				c := spec.Containers[0]
				if c.LivenessProbe.HTTPGet.Host != tc.host || c.ReadinessProbe.HTTPGet.Host != tc.host {
					t.Errorf("%v: probes on %s and %s, want %s", tc.families, c.LivenessProbe.HTTPGet.Host, c.ReadinessProbe.HTTPGet.Host, tc.host)
				}
			}
		}
	}
}

// The IPv4 address alone leaves deploy/'s Corefile and DaemonSet as they
// are, byte for byte.
func TestNodeLocalAddressesIPv4Unchanged(t *testing.T) {
	for _, dir := range []string{deploy.NodeLocalDNS, deploy.NodeLocalDNSLeftover} {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			switch o.GetKind() {
			case "ConfigMap":
				src := o.Object["data"].(map[string]any)["Corefile"].(string)
				if got := corefileAddresses(src, []netip.Addr{nodelocal.Address}); got != src {
					t.Errorf("%s: Corefile changed:\n%s", dir, got)
				}
			case "DaemonSet":
				before := o.DeepCopy()
				spec := o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
				daemonSetAddresses(spec, []netip.Addr{nodelocal.Address})
				a, _ := before.MarshalJSON()
				b, _ := o.MarshalJSON()
				if string(a) != string(b) {
					t.Errorf("%s: DaemonSet changed", dir)
				}
			}
		}
	}
}

// The per-node Jobs pass one --address per address, in order; the IPv4
// address alone gives the Job of before.
func TestKubeletJobAddresses(t *testing.T) {
	o := engine.Options{Timeout: time.Minute}
	before := []string{"node-local-dns", "switch-kubelet", "--address", "169.254.20.10", "--interface", "lo", "--timeout", "1m0s", "--kubelet-dir", "/host/var/lib/kubelet"}
	if got := kubeletJob("worker-1", switchKubelet, "i", o, []netip.Addr{nodelocal.Address}).Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, before) {
		t.Errorf("IPv4 alone: %q, want %q", got, before)
	}
	for _, a := range []nodeLocalAction{switchKubelet, teardownNode} {
		job := kubeletJob("worker-1", a, "i", o, nodelocal.Addresses(dualStack))
		args := job.Spec.Template.Spec.Containers[0].Args
		want := []string{"node-local-dns", a.name, "--address", "169.254.20.10", "--address", "fd84:5bd1:ae3::10", "--interface", "lo", "--timeout", "1m0s"}
		if !slices.Equal(args[:len(want)], want) {
			t.Errorf("%s: args %q, want %q first", a.name, args, want)
		}
	}
}

// Revert takes install's clusterDNS out of kubelet-config only while it is
// the list install wrote: both addresses on a dual-stack cluster.
func TestKubeletConfigUndoDualStack(t *testing.T) {
	before := kubeletConfig("v1.36.3")
	dual := nodelocal.Strings(nodelocal.Addresses(dualStack))
	after, _, err := nodelocal.SetClusterDNS([]byte(before), dual)
	if err != nil {
		t.Fatal(err)
	}
	rec := engine.Record{Before: before, After: string(after)}
	got, err := kubeletConfigUndo(nil, string(after), rec)
	if cfg, perr := nodelocal.ParseKubeletConfig([]byte(got)); err != nil || perr != nil || !slices.Equal(cfg.ClusterDNS, []string{"10.96.0.10"}) {
		t.Errorf("undo of the dual-stack clusterDNS: %v %v\n%s", err, perr, got)
	}
	// A user's later clusterDNS stays.
	other, _, _ := nodelocal.SetClusterDNS([]byte(before), []string{"10.96.0.53"})
	if got, err := kubeletConfigUndo(nil, string(other), rec); err != nil || got != string(other) {
		t.Errorf("a later clusterDNS was changed: %v\n%s", err, got)
	}
	// An earlier install's record (IPv4 alone) still undoes.
	v4, _, _ := nodelocal.SetClusterDNS([]byte(before), []string{"169.254.20.10"})
	if got, err := kubeletConfigUndo(nil, string(v4), engine.Record{Before: before}); err != nil || got == string(v4) {
		t.Errorf("undo of an earlier install's clusterDNS: %v\n%s", err, got)
	}
}

// The leftover of a dual-stack cluster binds both addresses and sets up
// and lingers on both; revert's records say which.
func TestLeftoverObjectsDualStack(t *testing.T) {
	w := leftover.Window{Since: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	addrs := unionAddresses(recordedAddresses(&engine.KubeletRecord{Addresses: []string{"169.254.20.10", "fd84:5bd1:ae3::10"}}), recordedAddresses(nil))
	if addrList(addrs) != "169.254.20.10,fd84:5bd1:ae3::10" {
		t.Fatalf("recorded addresses %s", addrList(addrs))
	}
	objs, err := leftoverObjects(map[string]string{}, map[string]leftover.Window{"worker-1": w}, addrs)
	if err != nil {
		t.Fatal(err)
	}
	both := []string{"--address", "169.254.20.10", "--address", "fd84:5bd1:ae3::10"}
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			corefile := o.Object["data"].(map[string]any)[leftover.CorefileKey].(string)
			if !strings.Contains(corefile, "bind 169.254.20.10 fd84:5bd1:ae3::10\n    health 169.254.20.10:8082\n    ready 169.254.20.10:8183\n") {
				t.Errorf("Corefile:\n%s", corefile)
			}
		case "DaemonSet":
			ds := &appsv1.DaemonSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
				t.Fatal(err)
			}
			for _, c := range slices.Concat(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers) {
				if c.Name == "coredns" {
					continue
				}
				if i := slices.Index(c.Args, "--address"); i < 0 || !slices.Equal(c.Args[i:i+4], both) || slices.Contains(c.Args[i+4:], "--address") {
					t.Errorf("%s args %q, want %q", c.Name, c.Args, both)
				}
			}
		}
	}
	// Status and takeover read the leftover's addresses back from it.
	var ds *appsv1.DaemonSet
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			ds = &appsv1.DaemonSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ds); err != nil {
				t.Fatal(err)
			}
			ds.Namespace = "kube-system"
		}
	}
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(ds).Build()}
	got, err := setupAddresses(context.Background(), env, leftover.Name)
	if err != nil || addrList(got) != "169.254.20.10,fd84:5bd1:ae3::10" {
		t.Errorf("setupAddresses: %s, %v", addrList(got), err)
	}
	if got, err := setupAddresses(context.Background(), env, nodeLocalDNS); err != nil || addrList(got) != "169.254.20.10" {
		t.Errorf("setupAddresses of a DaemonSet not there: %s, %v", addrList(got), err)
	}
}

// status on a dual-stack cluster: a kubelet on both addresses is switched
// and printed as "kubelet clusterDNS 169.254.20.10,fd84:5bd1:ae3::10"; one
// still on the IPv4 address alone (an earlier install's) is not.
func TestNodeLocalStatusDualStack(t *testing.T) {
	clusterDNS := map[string]string{"worker-1": `["169.254.20.10","fd84:5bd1:ae3::10"]`, "worker-2": `["169.254.20.10"]`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		node := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/"), "/proxy/configz")
		dns, ok := clusterDNS[node]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"kubeletconfig":{"clusterDNS":%s}}`, dns)
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for _, n := range []string{"worker-1", "worker-2"} {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-local-dns-" + n, Namespace: "kube-system", Labels: map[string]string{nodeLocalPodLabel: nodeLocalPodLabelV}},
				Spec: corev1.PodSpec{NodeName: n}, Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(objs...).Build(), Clientset: cs}
	detail, all, err := nodeLocalStatus(context.Background(), env, &engine.StepState{}, nodelocal.Addresses(dualStack))
	want := "worker-1: cache Ready; kubelet clusterDNS 169.254.20.10,fd84:5bd1:ae3::10; worker-2: cache Ready; kubelet clusterDNS 169.254.20.10 (not switched)"
	if err != nil || all || detail != want {
		t.Errorf("status: %q, all %v, %v; want %q, not all", detail, all, err, want)
	}
	detail, all, err = nodeLocalStatus(context.Background(), env, &engine.StepState{}, []netip.Addr{nodelocal.Address})
	want = "worker-1: cache Ready; kubelet clusterDNS 169.254.20.10,fd84:5bd1:ae3::10 (not switched); worker-2: cache Ready; kubelet clusterDNS 169.254.20.10"
	if err != nil || all || detail != want {
		t.Errorf("status (IPv4): %q, all %v, %v; want %q", detail, all, err, want)
	}
}

// status on nodes whose /configz the apiserver will not proxy to (their
// names resolve to 127.0.1.1 where it runs): a node install switched to
// these addresses counts as switched, with why it was not read back; one
// it did not switch, or switched to other addresses, or restored, does not.
func TestNodeLocalStatusNotProxyable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"address not allowed","reason":"BadRequest","code":400}`)
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-local-dns-master-1", Namespace: "kube-system", Labels: map[string]string{nodeLocalPodLabel: nodeLocalPodLabelV}},
			Spec: corev1.PodSpec{NodeName: "master-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
	}
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(objs...).Build(), Clientset: cs}
	since := &metav1.Time{Time: time.Now()}
	addrs := nodelocal.Addresses(dualStack)
	for _, tc := range []struct {
		name   string
		record *engine.KubeletRecord
		all    bool
	}{
		{"switched by install", &engine.KubeletRecord{Node: "master-1", Addresses: nodelocal.Strings(addrs), Since: since}, true},
		{"not switched", nil, false},
		{"switched to the IPv4 address alone", &engine.KubeletRecord{Node: "master-1", Since: since}, false},
		{"restored", &engine.KubeletRecord{Node: "master-1", Addresses: nodelocal.Strings(addrs), Since: since, Until: since}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := &engine.StepState{Records: map[string]engine.Record{}}
			if tc.record != nil {
				ss.Records[kubeletRecordKey("master-1")] = engine.Record{Kubelet: tc.record}
			}
			detail, all, err := nodeLocalStatus(context.Background(), env, ss, addrs)
			if err != nil || all != tc.all || !strings.Contains(detail, "`127.0.1.1 master-1`") {
				t.Errorf("status: %q, all %v, %v; want all %v and the /etc/hosts line named", detail, all, err, tc.all)
			}
		})
	}
}

// switchNode on a node the apiserver will not proxy to: switched by an
// install that finished, it is left alone (no Job, no kubelet restart);
// after an interrupted one, it is switched again (here: a dry run says so).
func TestSwitchNodeNotProxyable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "address not allowed")
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	addrs := nodelocal.Addresses(dualStack)
	for _, applied := range []bool{true, false} {
		env := &engine.Env{Client: fake.NewClientBuilder().Build(), Clientset: cs, Options: engine.Options{DryRun: !applied}}
		ss := &engine.StepState{Applied: applied, Records: map[string]engine.Record{kubeletRecordKey("master-1"): {Kubelet: &engine.KubeletRecord{
			Node: "master-1", Addresses: nodelocal.Strings(addrs), Since: &metav1.Time{Time: time.Now()}}}}}
		changed, err := switchNode(context.Background(), env, ss, "master-1", addrs)
		if err != nil || changed == applied {
			t.Errorf("install applied %v: switchNode changed %v, %v; want changed %v", applied, changed, err, !applied)
		}
	}
}

// Switched again to both families, a kubelet an earlier version switched
// to the IPv4 address keeps its Since (pods made since resolve at
// 169.254.20.10 and revert must not strand them); one never switched, or
// restored since, starts now.
func TestSwitchRecordKeepsSince(t *testing.T) {
	first := metav1.NewTime(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	now := first.Add(48 * time.Hour)
	dual := nodelocal.Addresses(dualStack)
	for _, tc := range []struct {
		name string
		prev *engine.KubeletRecord
		want time.Time
	}{
		{"never switched", nil, now},
		{"recorded, not switched (a cache's node)", &engine.KubeletRecord{Node: "worker-1"}, now},
		{"switched to IPv4 by an earlier version", &engine.KubeletRecord{Node: "worker-1", Since: &first}, first.Time},
		{"restored since", &engine.KubeletRecord{Node: "worker-1", Since: &first, Until: &metav1.Time{Time: first.Add(time.Hour)}}, now},
	} {
		got := switchRecord(tc.prev, "worker-1", "example.org/s:2", dual, now)
		if !got.Since.Time.Equal(tc.want) || got.Until != nil || got.Image != "example.org/s:2" || !slices.Equal(got.Addresses, nodelocal.Strings(dual)) {
			t.Errorf("%s: %+v, want Since %s and both addresses", tc.name, got, tc.want)
		}
	}
}

// Before the caches go, revert gives a node recorded with the IPv4 address
// alone (an earlier version's switch, or NotReady while install rolled the
// caches to both families) the DaemonSet's addresses too, so teardown
// takes both off; a node with no record gets one; a pod whose setup never
// ran adds nothing.
func TestRecordCacheNodesTakesTheDaemonSetsAddresses(t *testing.T) {
	p, err := layout.Named(layout.YurtTunnel)
	if err != nil {
		t.Fatal(err)
	}
	opts := engine.Options{CoreDNSImage: "example.org/c:1", SyncImage: "example.org/s:1"}
	objs, err := nodeLocalObjects(context.Background(), &engine.Env{Client: fake.NewClientBuilder().WithObjects(upstreamService(dualStack)).Build(), Options: opts}, p)
	if err != nil {
		t.Fatal(err)
	}
	var ds client.Object
	for _, o := range objs {
		if o.GetKind() == "DaemonSet" {
			o.SetNamespace(tunnelnodes.Namespace)
			ds = o
		}
	}
	cachePod := func(node string, started bool) client.Object {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "node-local-dns-" + node, Namespace: tunnelnodes.Namespace, Labels: map[string]string{nodeLocalPodLabel: nodeLocalPodLabelV}},
			Spec: corev1.PodSpec{NodeName: node}}
		if started {
			pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
		}
		return pod
	}
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(ds, cachePod("master-1", true), cachePod("worker-1", true), cachePod("worker-2", false)).Build(), Options: opts}
	since := metav1.NewTime(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	ss := &engine.StepState{Records: map[string]engine.Record{
		kubeletRecordKey("worker-1"): {Kubelet: &engine.KubeletRecord{Node: "worker-1", Image: "example.org/s:0", Since: &since}},
	}, Persist: func(context.Context) error { return nil }}
	if _, err := recordCacheNodes(context.Background(), env, ss); err != nil {
		t.Fatal(err)
	}
	both := "169.254.20.10,fd84:5bd1:ae3::10"
	for node, want := range map[string]string{"master-1": both, "worker-1": both} {
		rec := ss.Records[kubeletRecordKey(node)].Kubelet
		if rec == nil || addrList(recordedAddresses(rec)) != want {
			t.Errorf("%s: record %+v, want addresses %s", node, rec, want)
		}
	}
	if w1 := ss.Records[kubeletRecordKey("worker-1")].Kubelet; !w1.Since.Equal(&since) || w1.Image != "example.org/s:0" {
		t.Errorf("worker-1's switch changed: %+v", w1)
	}
	if rec := ss.Records[kubeletRecordKey("worker-2")].Kubelet; rec != nil {
		t.Errorf("worker-2, whose setup never ran, recorded: %+v", rec)
	}
}
