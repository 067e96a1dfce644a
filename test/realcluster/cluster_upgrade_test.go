package realcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/kubeadmconfig"
	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/internal/staticpod"
	"github.com/yurtdns/yurtdns/test/cluster"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeadmUpgrade runs first (this file sorts first after
// TestClusterAsBuilt's): on the cluster TestMain starts at v1.36.3, yurtdns
// installs with its control-plane step and NodeLocal DNS while a real
// Prometheus scrapes the edge (edgeScraper); the cluster is upgraded to
// v1.37.1 as kubeadm's documentation gives it plus the --patches install's
// README adds; then once more the plain way on one control-plane node;
// then revert. The package's other tests run on the upgraded cluster.
func TestKubeadmUpgrade(t *testing.T) {
	ctx := context.Background()
	testStarted := time.Now()
	if v := kc.Master().Version(); v != cluster.PreviousKubernetesVersion {
		t.Skipf("the cluster runs %s, not %s: nothing to upgrade", v, cluster.PreviousKubernetesVersion)
	}
	scraper := startEdgeScraper(t)
	// Pods made before install ask through kube-dns's ClusterIP all along;
	// revert must not break them either.
	before := []podNetns{startPausePod(t, "upgrade-m1", "master-1"), startPausePod(t, "upgrade-w1", "worker-1")}
	// Node names answer once install is done; a ClusterIP Service all along.
	probes := startProbe("", probeName, "", askers(before))

	api := startAPIProbe(t)
	began := time.Now()
	if _, err := runSync(t, "install", "--control-plane-jobs", "--node-local-dns"); err != nil {
		t.Fatalf("install --control-plane-jobs --node-local-dns: %v", err)
	}
	ended := time.Now()
	t.Logf("install --control-plane-jobs --node-local-dns took %s", ended.Sub(began).Round(100*time.Millisecond))
	checkOneControlPlaneNodeAtATime(t, api.finish(t, "install --control-plane-jobs --node-local-dns"), "install")
	probes.finish(t, "install --control-plane-jobs --node-local-dns, asked from pods made before it")
	scraper.checkInstalled(t, began, ended)

	// And pods that ask the node-local cache.
	after := []podNetns{startPausePod(t, "upgrade-local-m1", "master-1"), startPausePod(t, "upgrade-local-w1", "worker-1")}
	local := startUpgradeProbes(after)
	caches := cachePods(t)

	t.Run("kubeadm upgrade as the README gives it", func(t *testing.T) {
		probes := startUpgradeProbes(before)
		api := startAPIProbe(t)
		upgrade(t)
		// kubeadm's own restarts: logged, not held to install's bound.
		checkOneControlPlaneNodeAtATime(t, api.report(t, "the documented upgrade"), "the documented upgrade")
		probes.finish(t, "the documented upgrade, asked from pods made before install")
		checkUpgradeKeptInstall(t)
	})

	t.Run("a plain kubeadm upgrade on master-2 alone, then install", func(t *testing.T) {
		// The operator's own patches directory, without install's patch.
		m := kc.Node("master-2")
		plain := filepath.Join(filepath.Dir(cluster.KubeadmPatchesDir), "patches-operator")
		hostPatches, hostPlain := inNode(m, cluster.KubeadmPatchesDir), inNode(m, plain)
		if err := os.MkdirAll(hostPlain, 0o755); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(hostPatches)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() == staticpod.KubeadmPatchFile {
				continue
			}
			data, err := os.ReadFile(filepath.Join(hostPatches, e.Name()))
			if err == nil {
				err = os.WriteFile(filepath.Join(hostPlain, e.Name()), data, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		probes := startUpgradeProbes(before)
		api := startAPIProbe(t)
		started := time.Now()
		if out, err := m.Run(ctx, kc.Kubeadm(cluster.KubernetesVersion), "upgrade", "node",
			"--patches", plain, "--ignore-preflight-errors", "SystemVerification"); err != nil {
			t.Fatalf("kubeadm upgrade node on master-2 without install's patch: %v\n%s", err, out)
		}
		t.Logf("plain kubeadm upgrade node on master-2 took %s", time.Since(started).Round(100*time.Millisecond))
		out, err := runSync(t, "status")
		if err == nil || !regexp.MustCompile(`control-plane\s+drifted \(undone since install .*kube-apiserver-master-2 runs dnsPolicy ClusterFirst`).MatchString(out) ||
			strings.Contains(out, "kube-apiserver-master-1 runs") || strings.Contains(out, "kube-apiserver-master-3 runs") {
			t.Errorf("status after a plain upgrade on master-2 must name master-2's kube-apiserver, and it alone (exit %v):\n%s", err, out)
		}
		// check names the node whose kube-apiserver lacks the edits the
		// others have: a fault only a cluster of several has.
		alike := regexp.MustCompile(`^. control-planes-alike: `)
		out, err = runSync(t, "check")
		if line := firstMatch(out, alike); err == nil || !strings.HasPrefix(line, "✖") || !strings.Contains(line, "kube-apiserver-master-2 lacks install's edits") {
			t.Errorf("check after a plain upgrade on master-2 must fail naming master-2 (exit %v):\n%s", err, out)
		}
		started = time.Now()
		if out, err := runSync(t, "install", "--control-plane-jobs", "--node-local-dns"); err != nil || !strings.Contains(out, "[control-plane] applied again, kube-apiserver-master-2 runs dnsPolicy ClusterFirst") {
			t.Errorf("install after the plain upgrade (%v):\n%s", err, out)
		}
		t.Logf("install after the plain upgrade took %s", time.Since(started).Round(100*time.Millisecond))
		if out, _ := runSync(t, "check"); !strings.HasPrefix(firstMatch(out, alike), "✔") {
			t.Errorf("check after install restored master-2: control-planes-alike must pass:\n%s", out)
		}
		checkSyncNotRestarted(t, "the plain kubeadm upgrade and install")
		checkOneControlPlaneNodeAtATime(t, api.report(t, "the plain upgrade on master-2 and install"), "the plain upgrade on master-2 and install")
		probes.finish(t, "the plain upgrade and install, asked from pods made before install")
		checkUpgradeKeptInstall(t)
	})
	local.finish(t, "both kubeadm upgrades and installs, asked from pods made under node-local DNS")
	t.Logf("the node-local caches before the kubeadm upgrades: %s; after them: %s", caches, cachePods(t))

	// Node names answer until the records go, then as kubeadm's CoreDNS has
	// them; the pods made under node-local DNS keep asking there: revert
	// hands the addresses to the leftover forwarder.
	probes = startProbe("", probeName, "", askers(slices.Concat(before, after)))
	api = startAPIProbe(t)
	began = time.Now()
	out, err := runSync(t, "revert")
	if err != nil {
		t.Fatalf("revert after the upgrade: %v", err)
	}
	checkOneControlPlaneNodeAtATime(t, api.finish(t, "revert after the upgrades"), "revert after the upgrades")
	probes.finish(t, "revert, asked from pods made before install and from those made under node-local DNS")
	checkLeftover(t, out, after)
	checkRevertedAsKubeadmRenders(t, testStarted)
	scraper.checkReverted(t, began)
}

// cachePods names the node-local caches, each with its node and start.
func cachePods(t *testing.T) string {
	t.Helper()
	pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=node-local-dns"})
	if err != nil {
		t.Fatal(err)
	}
	var caches []string
	for _, p := range pods.Items {
		caches = append(caches, fmt.Sprintf("%s on %s made %s", p.Name, p.Spec.NodeName, p.CreationTimestamp.Format(time.TimeOnly)))
	}
	return strings.Join(caches, ", ")
}

// inNode is where a path inside node's mount namespace is on the machine.
func inNode(n *cluster.Node, path string) string {
	return filepath.Join(n.StateDir("etc/kubernetes"), strings.TrimPrefix(path, "/etc/kubernetes"))
}

// upgrade moves the cluster to v1.37.1 as kubeadm's documentation gives it,
// each node's kubelet swapped and restarted after its kubeadm upgrade. No
// drain: the DNS pods are DaemonSets, which a drain leaves, and master-1's
// other pods (yurt-tunnel-server, yurt-manager) would move to the edge node.
func upgrade(t *testing.T) {
	patches := cluster.KubeadmPatchesDir
	ctx := context.Background()
	kubeadm := kc.Kubeadm(cluster.KubernetesVersion)
	for _, n := range kc.Nodes {
		args := []string{"upgrade", "node"}
		if n == kc.Master() {
			args = []string{"upgrade", "apply", cluster.KubernetesVersion, "--yes"}
		}
		// cgroups v1: kubeadm init's one hard preflight error here too.
		args = append(args, "--patches", patches, "--ignore-preflight-errors", "SystemVerification")
		started := time.Now()
		if out, err := n.Run(ctx, kubeadm, args...); err != nil {
			t.Fatalf("kubeadm %s on %s: %v\n%s", strings.Join(args, " "), n.Name, err, out)
		}
		upgraded := time.Since(started)
		if err := n.UpgradeKubelet(ctx); err != nil {
			t.Fatalf("%s's kubelet: %v", n.Name, err)
		}
		t.Logf("%s: kubeadm %s took %s, the kubelet swapped and Ready %s later", n.Name, args[1],
			upgraded.Round(100*time.Millisecond), (time.Since(started) - upgraded).Round(100*time.Millisecond))
	}
}

// startUpgradeProbes asks, from each pod, a node name of each kind and a
// ClusterIP Service.
func startUpgradeProbes(pods []podNetns) *probeSet {
	var s probeSet
	for _, name := range []string{"worker-1", "master-1", probeName} {
		s = append(s, startProbe("", name, "", askers(pods)))
	}
	return &s
}

type probeSet []*dnsProbe

func (s probeSet) finish(t testing.TB, what string) {
	t.Helper()
	for _, p := range s {
		p.finish(t, what)
	}
}

// checkUpgradeKeptInstall: after an upgrade, without install run again (or
// after the one install that restores), everything install did is live.
func checkUpgradeKeptInstall(t *testing.T) {
	ctx := context.Background()
	checkSyncNotRestarted(t, "the kubeadm upgrade")
	waitTopologyRestored(t)
	out, err := runSyncQuiet(t, "status")
	if err != nil || strings.Contains(out, "drifted") || !regexp.MustCompile(`(?m)^control-plane\s+applied`).MatchString(out) {
		t.Errorf("status after the upgrade: every step install applied must be applied (exit %v):\n%s", err, out)
	}
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil || svc.Annotations["openyurt.io/topologyKeys"] != "openyurt.io/nodepool" {
		t.Errorf("kube-dns annotations after the upgrade: %v %v", svc.Annotations, err)
	}
	for _, n := range kc.Nodes {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil || node.Status.NodeInfo.KubeletVersion != cluster.KubernetesVersion {
			t.Errorf("%s's kubelet: %v %v", n.Name, node.Status.NodeInfo.KubeletVersion, err)
		}
	}
	apiserver, err := cs.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-master-1", metav1.GetOptions{})
	if err != nil || !strings.HasSuffix(apiserver.Spec.Containers[0].Image, ":"+cluster.KubernetesVersion) {
		t.Errorf("kube-apiserver after the upgrade: %v", err)
	}
	// kubeadm's kube-proxy addon replaced the DaemonSet: its pods roll.
	if out, err := kc.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=3m"); err != nil {
		t.Errorf("kube-proxy's rollout after the upgrade: %v\n%s", err, out)
	}
	// The upgrade restarted kube-apiserver, and yurt-tunnel-server exits
	// when it loses it: the kubelet's back-off brings it back.
	waitTunnelEndpoints(t, 5*time.Minute)
	lift, err := kc.Node("worker-1").RefuseFromOutside(10250)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := lift(); err != nil {
			t.Error(err)
		}
	}()
	checkLogsAndExec(t)
}

// waitTopologyRestored waits until the sync has put kube-dns's topology
// annotation back, which kubeadm's CoreDNS addon drops near the end of
// upgrade apply. The sync may be down then: it exits when it cannot renew
// its Lease while kube-apiserver restarts, and the kubelet starts it again
// after its back-off (10 s, doubling).
func waitTopologyRestored(t *testing.T) {
	t.Helper()
	started := time.Now()
	for {
		svc, err := cs.CoreV1().Services("kube-system").Get(context.Background(), "kube-dns", metav1.GetOptions{})
		if err == nil && svc.Annotations["openyurt.io/topologyKeys"] == "openyurt.io/nodepool" {
			break
		}
		if time.Since(started) > 3*time.Minute {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tunnel-nodes-sync"})
	if err != nil {
		t.Fatal(err)
	}
	var restarts []string
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			restarts = append(restarts, fmt.Sprintf("%s on %s restarted %d times%s", p.Name, p.Spec.NodeName, c.RestartCount, lastExit(c)))
		}
	}
	t.Logf("kube-dns's topology annotation there %s after the upgrade ended; the sync: %s",
		time.Since(started).Round(100*time.Millisecond), strings.Join(restarts, "; "))
}

// lastExit says how and when the container last ended, if it has.
func lastExit(c corev1.ContainerStatus) string {
	last := c.LastTerminationState.Terminated
	if last == nil {
		return ""
	}
	return fmt.Sprintf(", last exit %d (%s) at %s", last.ExitCode, last.Reason, last.FinishedAt.Format(time.TimeOnly))
}

// checkRevertedAsKubeadmRenders: revert after an upgrade leaves the cluster
// as kubeadm v1.37.1 does without yurtdns: manifests as it renders them
// (kubeadm upgrade diff finds nothing to change), kubeadm-config without
// install's flags, kubelet-config's clusterDNS back on kube-dns.
func checkRevertedAsKubeadmRenders(t *testing.T, testStarted time.Time) {
	ctx := context.Background()
	for _, m := range kc.ControlPlanes() {
		out, err := m.Run(ctx, kc.Kubeadm(cluster.KubernetesVersion), "upgrade", "diff", cluster.KubernetesVersion)
		if err != nil || regexp.MustCompile(`(?m)^[-+]\s`).MatchString(out) {
			t.Errorf("kubeadm upgrade diff on %s after revert: the manifests are not as kubeadm %s renders them (%v):\n%s", m.Name, cluster.KubernetesVersion, err, out)
		}
		manifest, err := os.ReadFile(filepath.Join(m.StateDir("etc/kubernetes"), "manifests", "kube-apiserver.yaml"))
		if err != nil || strings.Contains(string(manifest), "dnsPolicy") || !strings.Contains(string(manifest), "kube-apiserver:"+cluster.KubernetesVersion) {
			t.Errorf("kube-apiserver.yaml on %s after revert (%v):\n%s", m.Name, err, manifest)
		}
		if _, err := os.Stat(filepath.Join(inNode(m, cluster.KubeadmPatchesDir), staticpod.KubeadmPatchFile)); !os.IsNotExist(err) {
			t.Errorf("install's kubeadm patch on %s after revert: %v", m.Name, err)
		}
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, kubeadmconfig.ConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := kubeadmconfig.ExtraArg(cm.Data[kubeadmconfig.Key], kubeadmconfig.APIServer, "kubelet-preferred-address-types"); ok || err != nil {
		t.Errorf("kubeadm-config after revert still has kubelet-preferred-address-types=%s (%v)", v, err)
	}
	kubelet, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubelet-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := nodelocal.ParseKubeletConfig([]byte(kubelet.Data["kubelet"]))
	if err != nil || !slices.Equal(cfg.ClusterDNS, []string{cluster.KubeDNSIP()}) {
		t.Errorf("kubelet-config's clusterDNS after revert: %v (%v), want %s", cfg.ClusterDNS, err, cluster.KubeDNSIP())
	}
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if _, ok := svc.Annotations["openyurt.io/topologyKeys"]; err != nil || ok {
		t.Errorf("kube-dns annotations after revert: %v %v", svc.Annotations, err)
	}
	checkReverted(t, ctx, testStarted)
}

// checkLogsAndExec: kubectl logs and exec of a pod on worker-1 work; the
// caller has worker-1 refuse its kubelet port to everyone but itself, so
// they come through yurt-tunnel-server and worker-1's yurt-tunnel-agent, by
// node name.
func checkLogsAndExec(t *testing.T) {
	worker := kc.Node("worker-1")
	pod := podOn(t, "k8s-app=kube-proxy", worker.Name)
	if logs, err := throughTunnel(t, "-n", "kube-system", "logs", pod, "--tail=3"); err != nil || strings.TrimSpace(logs) == "" {
		t.Errorf("kubectl logs %s on worker-1: %v %q", pod, err, logs)
	}
	want := worker.Version()
	if out, err := throughTunnel(t, "-n", "kube-system", "exec", pod, "--", "/usr/local/bin/kube-proxy", "--version"); err != nil || !strings.Contains(out, want) {
		t.Errorf("kubectl exec %s on worker-1: %v %q, want %s", pod, err, out, want)
	}
}

// throughTunnel runs kubectl, asking again for up to three minutes while
// the tunnel itself fails (yurt-tunnel-server restarts whenever
// kube-apiserver did, its proxier socket breaks a connection made before,
// and yurt-tunnel-agent reconnects on its own back-off): what DNS decides,
// a node name that does not resolve, fails at once. Empty output is the
// tunnel failing too: kubectl logs ends with success when the stream it
// reads is cut before the first line.
func throughTunnel(t *testing.T, args ...string) (string, error) {
	t.Helper()
	started := time.Now()
	var failed error
	for tries := 1; ; tries++ {
		out, err := kc.Kubectl(context.Background(), args...)
		if err == nil && strings.TrimSpace(out) == "" {
			err = errors.New("nothing printed")
		}
		if err == nil || strings.Contains(err.Error(), "no such host") || time.Since(started) > 3*time.Minute {
			if failed != nil {
				t.Logf("kubectl %s: %d tries in %s; the tunnel failed before: %v", args[2], tries, time.Since(started).Round(time.Second), failed)
			}
			return out, err
		}
		failed = err
		time.Sleep(2 * time.Second)
	}
}
