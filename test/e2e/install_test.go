package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const fixtures = "../testdata/kubeadm"

// kubeadmCluster is a harness control plane with kubeadm's CoreDNS and
// kube-proxy objects, OpenYurt's tunnel Service, records and
// yurt-tunnel-server, and a local copy of kubeadm's static pod manifests.
type kubeadmCluster struct {
	*harness.ControlPlane
	manifests, backups string
}

func newKubeadmCluster(t *testing.T) *kubeadmCluster { return newKubeadmClusterOf(t, ipv4Cluster) }

// clusterAddresses are a kubeadm cluster's addresses in one IP family.
type clusterAddresses struct {
	options                 harness.Options
	kubeDNS, tunnel, master string
}

var (
	ipv4Cluster = clusterAddresses{kubeDNS: "10.96.0.10", tunnel: "10.96.0.9", master: "192.168.0.10"}
	// kubeadm gives kube-dns the tenth address of the Service range.
	ipv6Cluster = clusterAddresses{options: harness.Options{IPv6Only: true},
		kubeDNS: "fd00:10:96::a", tunnel: "fd00:10:96::9", master: "2001:db8:100::10"}
)

func newKubeadmClusterOf(t *testing.T, a clusterAddresses) *kubeadmCluster {
	cp := harness.Start(t, a.options)
	coredns, err := os.ReadFile(filepath.Join(fixtures, "coredns.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(t.TempDir(), "coredns.yaml")
	if err := os.WriteFile(renamed, []byte(strings.Replace(string(coredns), "clusterIP: 10.96.0.10", "clusterIP: "+a.kubeDNS, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cp.CreateFromFile(t, renamed)
	cp.CreateFromFile(t, filepath.Join(fixtures, "kube-proxy.yaml"))
	cp.CreateService(t, harness.TunnelService(a.tunnel))
	createYurtTunnelServer(t, cp, yurtTunnelServerArgs...)
	// The control-plane node, Ready, with OpenYurt's yurthub (its mirror pod).
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: a.master, Ready: true,
		Labels: map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""}})
	createYurthub(t, cp, "master-1")
	root := t.TempDir()
	k := &kubeadmCluster{ControlPlane: cp, manifests: filepath.Join(root, "manifests"), backups: filepath.Join(root, "yurtdns-backup")}
	if err := os.MkdirAll(k.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"kube-apiserver.yaml", "kube-controller-manager.yaml"} {
		data, err := os.ReadFile(filepath.Join(fixtures, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(k.manifests, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// createYurthub creates the mirror pod of yurthub's static pod on node, as
// the kubelet does on an OpenYurt node (yurtadm join writes the manifest).
func createYurthub(t *testing.T, cp *harness.ControlPlane, node string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "yurt-hub-" + node, Namespace: tunnelnodes.Namespace, Labels: map[string]string{"k8s-app": "yurt-hub"},
			Annotations: map[string]string{"kubernetes.io/config.mirror": "0", "kubernetes.io/config.source": "file"}},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, Containers: []corev1.Container{{Name: "yurt-hub", Image: "openyurt/yurthub:v1.6.1"}}},
	}
	if _, err := cp.Client.CoreV1().Pods(tunnelnodes.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating yurthub's mirror pod on %s: %v", node, err)
	}
}

// run runs a tunnel-nodes-sync subcommand against the cluster and returns
// its output and how it ended.
func (k *kubeadmCluster) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	p := k.start(t, k.Kubeconfig, args...)
	err := p.Wait(t, 2*time.Minute)
	return p.Output(), err
}

// start starts a tunnel-nodes-sync subcommand against the cluster's
// manifests (install is given them; revert and status read them from the
// install state), reaching the apiserver through kubeconfig, and does not
// wait.
func (k *kubeadmCluster) start(t *testing.T, kubeconfig string, args ...string) *harness.Process {
	t.Helper()
	all := []string{args[0], "--kubeconfig", kubeconfig, "--timeout", "20s"}
	if args[0] == "install" {
		all = append(all, "--manifests-dir", k.manifests, "--backup-dir", k.backups)
	}
	all = append(all, args[1:]...)
	return harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), all...)
}

// snapshot captures what install may change and revert must restore:
// the objects' data, annotations and specs, and the manifest files.
func (k *kubeadmCluster) snapshot(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	s := map[string]string{}
	put := func(name string, v any) {
		b, _ := json.Marshal(v)
		s[name] = string(b)
	}
	for _, name := range []string{"coredns", "kube-proxy"} {
		cm, err := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		put("configmap/"+name, []any{cm.Data, cm.Labels, cm.Annotations})
	}
	svc, err := k.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put("service/kube-dns", []any{svc.Annotations, svc.Labels, svc.Spec})
	d, err := k.Client.AppsV1().Deployments(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put("deployment/coredns", []any{d.Spec, d.Annotations})
	tunnel, err := k.Client.AppsV1().Deployments(tunnelnodes.Namespace).Get(ctx, "yurt-tunnel-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put("deployment/yurt-tunnel-server", tunnel.Spec)
	proxy, err := k.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := proxy.Spec.DeepCopy()
	delete(spec.Template.Annotations, "kubectl.kubernetes.io/restartedAt") // a restart is how config changes take effect
	put("daemonset/kube-proxy", spec)
	for _, f := range []string{"kube-apiserver.yaml", "kube-controller-manager.yaml"} {
		data, err := os.ReadFile(filepath.Join(k.manifests, f))
		if err != nil {
			t.Fatal(err)
		}
		s["file/"+f] = string(data)
	}
	return s
}

func diffSnapshots(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	return out
}

// resourceVersions of everything install touches or creates.
func (k *kubeadmCluster) resourceVersions(t *testing.T) map[string]string {
	ctx := context.Background()
	rv := map[string]string{}
	put := func(prefix string, list runtime.Object) {
		items, _ := meta.ExtractList(list)
		for _, o := range items {
			if m, err := meta.Accessor(o); err == nil {
				rv[prefix+m.GetName()] = m.GetResourceVersion()
			}
		}
	}
	ns, opts := tunnelnodes.Namespace, metav1.ListOptions{}
	cms, _ := k.Client.CoreV1().ConfigMaps(ns).List(ctx, opts)
	put("cm/", cms)
	svcs, _ := k.Client.CoreV1().Services(ns).List(ctx, opts)
	put("svc/", svcs)
	deps, _ := k.Client.AppsV1().Deployments(ns).List(ctx, opts)
	put("deploy/", deps)
	dss, _ := k.Client.AppsV1().DaemonSets(ns).List(ctx, opts)
	put("ds/", dss)
	roles, _ := k.Client.RbacV1().Roles(ns).List(ctx, opts)
	put("role/", roles)
	return rv
}

// TestInstallRevert: dry run changes nothing and shows every change; install
// applies every step; a second install changes nothing; status reports;
// revert restores the originals; a second revert is a no-op.
func TestInstallRevert(t *testing.T) {
	t.Parallel()
	k := newKubeadmCluster(t)
	ctx := context.Background()
	original := k.snapshot(t)
	originalRVs := k.resourceVersions(t)

	out, err := k.run(t, "install", "--dry-run")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	for _, want := range []string{"[rbac] would: created Role", "[corefile] would:", "+    yurthosts {", "-    hosts /etc/edge/tunnel-nodes {",
		"[coredns-daemonset] would:", "DaemonSet kube-system/coredns", "[kube-dns-topology] would:", "+openyurt.io/nodepool",
		"[kube-proxy] would:", "+  #kubeconfig: /var/lib/kube-proxy/kubeconfig.conf", "[control-plane] would:", "-nodelifecycle,*,bootstrapsigner",
		"[tunnel-dns] would:", "+false", "[sync] would: created", "Deployment kube-system/tunnel-nodes-sync"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q", want)
		}
	}
	if changed := diffSnapshots(original, k.snapshot(t)); len(changed) > 0 {
		t.Fatalf("dry run changed %v", changed)
	}
	if rv := k.resourceVersions(t); fmt.Sprint(rv) != fmt.Sprint(originalRVs) {
		t.Fatalf("dry run wrote objects")
	}

	// An edge node cut off from the cloud (NotReady, its coredns pod never
	// Ready) does not block install; it is named.
	k.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true, Labels: map[string]string{"kubernetes.io/os": "linux"}})
	createYurthub(t, k.ControlPlane, "worker-1")
	stop := k.PlayRolloutControllers(tunnelnodes.Namespace)
	defer stop()
	// A sync removed by hand (kubectl delete -k takes its RBAC, so its pod
	// cannot release the Lease) left the Lease held: install clears it, as
	// the new sync would otherwise write nothing for the lease duration.
	holdSyncLease(t, k, "tunnel-nodes-sync-5f7d8c9b4-qx2lm_0b3c6f1e-8d2a-4e57-9a41-6c0f2d9e7b13")
	out, err = k.run(t, "install", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	t.Logf("install:\n%s", out)
	if !strings.Contains(out, "rolled out; deleted Lease kube-system/tunnel-nodes-sync held by tunnel-nodes-sync-5f7d8c9b4-qx2lm, a pod that no longer exists") {
		t.Errorf("install does not name the stale Lease it deleted:\n%s", out)
	}
	if _, err := k.Client.CoordinationV1().Leases(tunnelnodes.Namespace).Get(ctx, tunnelnodes.LeaderElectionID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stale Lease after install: %v, want it gone", err)
	}
	if !strings.Contains(out, "[coredns-daemonset] DaemonSet coredns Ready on every Ready node and behind kube-dns; Deployment coredns scaled to 0 (NotReady nodes not waited for: worker-1)") {
		t.Errorf("install does not name the NotReady node:\n%s", out)
	}

	// Every change is there; the stock Corefile is not edited.
	cm, _ := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, "coredns-yurt", metav1.GetOptions{})
	if !strings.Contains(cm.Data["Corefile"], "yurthosts {") || strings.Contains(cm.Data["Corefile"], "/etc/edge/tunnel-nodes") {
		t.Errorf("Corefile:\n%s", cm.Data["Corefile"])
	}
	if after := k.snapshot(t); after["configmap/coredns"] != original["configmap/coredns"] {
		t.Errorf("install edited the stock coredns ConfigMap:\n%s", after["configmap/coredns"])
	}
	ds, err := k.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podSpec := ds.Spec.Template.Spec
	if podSpec.Containers[0].Image != "coredns-yurt:test" || len(podSpec.Tolerations) != 1 || podSpec.Tolerations[0].Operator != corev1.TolerationOpExists ||
		len(podSpec.Volumes) != 1 || podSpec.Volumes[0].ConfigMap == nil || podSpec.Volumes[0].ConfigMap.Name != "coredns-yurt" || len(podSpec.Containers[0].VolumeMounts) != 1 || podSpec.ServiceAccountName != "coredns" ||
		podSpec.PriorityClassName != "system-cluster-critical" || podSpec.Containers[0].ReadinessProbe == nil {
		t.Errorf("coredns DaemonSet pod spec: %+v", podSpec)
	}
	d, _ := k.Client.AppsV1().Deployments(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{})
	if *d.Spec.Replicas != 0 {
		t.Errorf("Deployment coredns replicas %d, want 0", *d.Spec.Replicas)
	}
	svc, _ := k.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, "kube-dns", metav1.GetOptions{})
	if svc.Annotations["openyurt.io/topologyKeys"] != "openyurt.io/nodepool" {
		t.Errorf("kube-dns annotations %v", svc.Annotations)
	}
	proxyCM, _ := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, "kube-proxy", metav1.GetOptions{})
	if !strings.Contains(proxyCM.Data["config.conf"], "  #kubeconfig: /var/lib/kube-proxy/kubeconfig.conf\n") {
		t.Errorf("kube-proxy config.conf:\n%s", proxyCM.Data["config.conf"])
	}
	proxy, _ := k.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, "kube-proxy", metav1.GetOptions{})
	if proxy.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
		t.Error("kube-proxy was not restarted")
	}
	kcm, _ := os.ReadFile(filepath.Join(k.manifests, "kube-controller-manager.yaml"))
	if !strings.Contains(string(kcm), "--controllers=-nodelifecycle,*,bootstrapsigner,tokencleaner") {
		t.Error("kube-controller-manager manifest not patched")
	}
	if _, err := k.Client.RbacV1().Roles(tunnelnodes.Namespace).Get(ctx, "yurtdns:coredns", metav1.GetOptions{}); err != nil {
		t.Errorf("coredns role: %v", err)
	}
	tunnelServer, _ := k.Client.AppsV1().Deployments(tunnelnodes.Namespace).Get(ctx, "yurt-tunnel-server", metav1.GetOptions{})
	if args := tunnelServer.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--enable-dns-controller=false") {
		t.Errorf("yurt-tunnel-server args %q", args)
	}
	sync, err := k.Client.AppsV1().Deployments(tunnelnodes.Namespace).Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})
	if err != nil || sync.Spec.Template.Spec.Containers[0].Image != "tunnel-nodes-sync:test" {
		t.Errorf("sync deployment: %v", err)
	}

	// Install again: nothing changes, the Lease a running sync pod holds
	// included.
	pods, err := k.Client.CoreV1().Pods(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tunnel-nodes-sync"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the sync's pods: %v (%v)", pods, err)
	}
	holdSyncLease(t, k, pods.Items[0].Name+"_5d0e2a7c-1f4b-4c39-8e6a-2b7d9f3c0a15")
	installed, installedRVs := k.snapshot(t), k.resourceVersions(t)
	out, err = k.run(t, "install", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test")
	if err != nil {
		t.Fatalf("second install: %v\n%s", err, out)
	}
	// Every step says so but prometheus and monitoring, skipped here: no prometheus-operator.
	if n := strings.Count(out, "already applied"); n != len(layoutSteps(layout.YurtTunnel))-2 || !strings.Contains(out, "[prometheus] skipped") || !strings.Contains(out, "[monitoring] skipped") {
		t.Errorf("second install: %d steps say already applied, want all but prometheus and monitoring (skipped):\n%s", n, out)
	}
	if changed := diffSnapshots(installed, k.snapshot(t)); len(changed) > 0 {
		t.Errorf("second install changed %v", changed)
	}
	if rv := k.resourceVersions(t); fmt.Sprint(rv) != fmt.Sprint(installedRVs) {
		t.Errorf("second install wrote objects:\n%v\n%v", installedRVs, rv)
	}
	if _, err := k.Client.CoordinationV1().Leases(tunnelnodes.Namespace).Get(ctx, tunnelnodes.LeaderElectionID, metav1.GetOptions{}); err != nil {
		t.Errorf("the Lease of the running sync pod after the second install: %v", err)
	}

	// Status: all applied; an edit of the stock Corefile shows as drifted,
	// and install carries it over into coredns-yurt.
	if out, err := k.run(t, "status"); err != nil || !allApplied(out) {
		t.Errorf("status: %v\n%s", err, out)
	}
	setStockCorefile := func(corefile string) {
		t.Helper()
		cm, _ := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{})
		cm.Data["Corefile"] = corefile
		if _, err := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stockCM, _ := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{})
	stockCorefile := stockCM.Data["Corefile"]
	setStockCorefile(".:53 {\n    log\n    kubernetes cluster.local\n}\n")
	if out, err := k.run(t, "status"); err == nil || !strings.Contains(out, "corefile           drifted (the stock Corefile changed after install") {
		t.Errorf("status after a stock Corefile edit: %v\n%s", err, out)
	}
	if out, err := k.run(t, "install", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test"); err != nil ||
		!strings.Contains(out, "[corefile] ConfigMap kube-system/coredns-yurt updated: carries over the stock Corefile's changes") {
		t.Errorf("install after a stock Corefile edit: %v\n%s", err, out)
	}
	cm, _ = k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, "coredns-yurt", metav1.GetOptions{})
	if want := ".:53 {\n    log\n    yurthosts {\n        shards yurtdns-records\n        fallthrough\n    }\n    kubernetes cluster.local\n}\n"; cm.Data["Corefile"] != want {
		t.Errorf("coredns-yurt after carrying over:\n%s\nwant:\n%s", cm.Data["Corefile"], want)
	}
	setStockCorefile(stockCorefile)
	if out, err := k.run(t, "install", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test"); err != nil {
		t.Errorf("install: %v\n%s", err, out)
	}
	if out, err := k.run(t, "status"); err != nil || !allApplied(out) {
		t.Errorf("status: %v\n%s", err, out)
	}

	// An object install created, as an earlier version made it (or edited
	// since): status says so and what to do, and install moves it back.
	roles := k.Client.RbacV1().Roles(tunnelnodes.Namespace)
	role, err := roles.Get(ctx, "yurtdns:coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	installedRules := role.Rules
	role.Rules = role.Rules[:len(role.Rules)-1]
	if role, err = roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := k.run(t, "status"); err == nil || !strings.Contains(out,
		"rbac               drifted (not as this version installs: Role kube-system/yurtdns:coredns (run install to update them))") {
		t.Errorf("status with an earlier version's Role: %v\n%s", err, out)
	}
	if out, err := k.run(t, "install", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test"); err != nil ||
		!strings.Contains(out, "[rbac] updated Role kube-system/yurtdns:coredns") {
		t.Errorf("install over an earlier version's Role: %v\n%s", err, out)
	}
	if role, err = roles.Get(ctx, "yurtdns:coredns", metav1.GetOptions{}); err != nil || len(role.Rules) != len(installedRules) {
		t.Errorf("Role yurtdns:coredns after install: %+v (%v), want %+v", role.Rules, err, installedRules)
	}

	// The sync as its Deployment runs it (its ServiceAccount, its
	// --kube-dns-topology) keeps kube-dns's annotation, and outlives the
	// revert (no kubelet stops it with its pod): revert takes its RBAC and
	// waits its pods out before the kube-dns-topology step removes the
	// annotation, so the keeper's patch is refused and the annotation stays gone.
	if args := sync.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, kubeDNSTopologyArg) {
		t.Errorf("sync Deployment args %q lack %s", args, kubeDNSTopologyArg)
	}
	keeper := harness.StartSync(t, k.ServiceAccountKubeconfig(t, tunnelnodes.Namespace, sync.Spec.Template.Spec.ServiceAccountName),
		"--leader-elect=false", kubeDNSTopologyArg)

	// Revert: back to the originals, objects install created are gone.
	out, err = k.run(t, "revert")
	if err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	t.Logf("revert:\n%s", out)
	harness.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(keeper.Output(), `restoring openyurt.io/topologyKeys on Service kube-system/kube-dns: services \"kube-dns\" is forbidden`) {
			return fmt.Errorf("the keeper was not refused putting kube-dns's annotation back")
		}
		return nil
	})
	keeper.Stop()
	if changed := diffSnapshots(original, k.snapshot(t)); len(changed) > 0 {
		after := k.snapshot(t)
		for _, c := range changed {
			t.Errorf("revert left %s changed:\n%s\nwant:\n%s", c, after[c], original[c])
		}
	}
	for what, err := range map[string]error{
		"DaemonSet coredns":            getErr(k.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{})),
		"Deployment tunnel-nodes-sync": getErr(k.Client.AppsV1().Deployments(tunnelnodes.Namespace).Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})),
		"Role yurtdns:coredns":         getErr(k.Client.RbacV1().Roles(tunnelnodes.Namespace).Get(ctx, "yurtdns:coredns", metav1.GetOptions{})),
		"ConfigMap coredns-yurt":       getErr(k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, "coredns-yurt", metav1.GetOptions{})),
		"install state":                getErr(k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, engine.StateConfigMap, metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after revert: %v", what, err)
		}
	}
	out, err = k.run(t, "revert")
	// Every step says so, the opt-in node-local-dns too.
	if err != nil || strings.Count(out, "nothing to revert") != len(layoutSteps(layout.YurtTunnel))+1 {
		t.Errorf("second revert: %v\n%s", err, out)
	}
}

func getErr[T any](_ T, err error) error { return err }

// holdSyncLease creates the sync's Lease as held by identity
// (controller-runtime's "<hostname>_<uuid>"), renewed now.
func holdSyncLease(t *testing.T, k *kubeadmCluster, identity string) {
	t.Helper()
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.LeaderElectionID, Namespace: tunnelnodes.Namespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &identity, LeaseDurationSeconds: new(int32(15)), AcquireTime: &now, RenewTime: &now}}
	if _, err := k.Client.CoordinationV1().Leases(tunnelnodes.Namespace).Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestInstallTimeoutKeepsDNS: when the CoreDNS DaemonSet never becomes
// available, install stops with a clear error and the Deployment keeps
// serving; once it is available, running install again completes.
func TestInstallTimeoutKeepsDNS(t *testing.T) {
	t.Parallel()
	k := newKubeadmCluster(t)
	ctx := context.Background()
	out, err := k.run(t, "install", "--timeout", "2s")
	if err == nil || !strings.Contains(out, "DaemonSet coredns not serving on every Ready node after 2s (its controller has not seen the change yet); the coredns Deployment is left as it was") {
		t.Fatalf("want a timeout error, got %v:\n%s", err, out)
	}
	d, _ := k.Client.AppsV1().Deployments(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{})
	if *d.Spec.Replicas != 2 {
		t.Errorf("Deployment scaled to %d although the DaemonSet is not available", *d.Spec.Replicas)
	}
	if strings.Contains(out, "[kube-dns-topology]") {
		t.Errorf("steps after the failed one ran:\n%s", out)
	}

	stop := k.PlayRolloutControllers(tunnelnodes.Namespace)
	defer stop()
	out, err = k.run(t, "install")
	if err != nil {
		t.Fatalf("install after the timeout: %v\n%s", err, out)
	}
	for _, want := range []string{"[rbac] already applied", "[corefile] already applied", "[coredns-daemonset] DaemonSet coredns Ready on every Ready node", "[sync] created"} {
		if !strings.Contains(out, want) {
			t.Errorf("resumed install lacks %q:\n%s", want, out)
		}
	}
	if out, err := k.run(t, "status"); err != nil || !allApplied(out) {
		t.Errorf("status: %v\n%s", err, out)
	}

	// What the user changed after install is theirs: revert leaves it.
	svc, err := k.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Annotations["openyurt.io/topologyKeys"] = "kubernetes.io/hostname"
	if _, err := k.Client.CoreV1().Services(tunnelnodes.Namespace).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err = k.run(t, "revert")
	if err != nil || !strings.Contains(out, "[kube-dns-topology] Service kube-system/kube-dns annotation openyurt.io/topologyKeys changed since install: left as it is") {
		t.Errorf("revert: %v\n%s", err, out)
	}
	svc, _ = k.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, "kube-dns", metav1.GetOptions{})
	if svc.Annotations["openyurt.io/topologyKeys"] != "kubernetes.io/hostname" {
		t.Errorf("revert overwrote the user's annotation: %v", svc.Annotations)
	}
}

// TestInstallKubeProxyNeedsYurthub: on a cluster without yurthub, install
// refuses to point kube-proxy at the in-cluster config (it would reach the
// apiserver through the Service it programs itself): the step is skipped
// with the reason, kube-proxy is neither edited nor restarted, status says
// why, and revert has nothing to undo there.
func TestInstallKubeProxyNeedsYurthub(t *testing.T) {
	t.Parallel()
	k := newKubeadmCluster(t)
	ctx := context.Background()
	if err := k.Client.CoreV1().Pods(tunnelnodes.Namespace).Delete(ctx, "yurt-hub-master-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	original := k.snapshot(t)
	proxy, _ := k.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, "kube-proxy", metav1.GetOptions{})
	stop := k.PlayRolloutControllers(tunnelnodes.Namespace)
	defer stop()
	out, err := k.run(t, "install", "--skip", "control-plane,sync")
	if err != nil || !strings.Contains(out, "[kube-proxy] skipped: no yurthub found (no mirror pod kube-system/yurt-hub-<node>, no node in a NodePool): kube-proxy would reach the apiserver through the kubernetes Service") {
		t.Fatalf("install: %v\n%s", err, out)
	}
	after := k.snapshot(t)
	if after["configmap/kube-proxy"] != original["configmap/kube-proxy"] {
		t.Errorf("kube-proxy's config changed although the step was skipped")
	}
	if now, _ := k.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, "kube-proxy", metav1.GetOptions{}); now.Generation != proxy.Generation {
		t.Errorf("kube-proxy restarted although the step was skipped")
	}
	if out, _ := k.run(t, "status"); !strings.Contains(out, "kube-proxy         not applied (skipped by install: no yurthub found") {
		t.Errorf("status:\n%s", out)
	}
	out, err = k.run(t, "revert")
	if err != nil || !strings.Contains(out, "[kube-proxy] not applied: nothing to revert") {
		t.Errorf("revert: %v\n%s", err, out)
	}
	if changed := diffSnapshots(original, k.snapshot(t)); len(changed) > 0 {
		t.Errorf("revert left %v changed", changed)
	}
	// The skipped step's entry held nothing to undo: the state goes too.
	if _, err := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, engine.StateConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("install state after a full revert: %v", err)
	}
}
