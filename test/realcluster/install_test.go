package realcluster

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestInstallAndRevert is the user's path: install --control-plane-jobs from
// a laptop, DNS answering from every node all along; the image swap running
// under the real kubelet; node names answered from the apiserver's own view;
// the OpenYurt story through OpenYurt's own tunnel; then revert, leaving
// kubeadm's and OpenYurt's objects and manifests as they were.
func TestInstallAndRevert(t *testing.T) {
	ctx := context.Background()
	testStarted := time.Now()
	t.Logf("cluster came up in %s", upTime.Round(100*time.Millisecond))
	applyPrometheusFixtures(t)
	before := kubeadmState(t)
	monitorsBefore := serviceMonitors(t)

	probes := probeSet{startDNSProbe(kc.Nodes), startDNSProbeOf(cluster.KubeDNSIP6(), probeName, "", kc.Nodes)}
	api := startAPIProbe(t)
	started := time.Now()
	out, err := runSync(t, "install", "--control-plane-jobs")
	probes.finish(t, "install")
	installAPI := api.finish(t, "install")
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	t.Logf("install took %s", time.Since(started).Round(100*time.Millisecond))
	t.Run("control-plane nodes patched one at a time", func(t *testing.T) { checkOneControlPlaneNodeAtATime(t, installAPI, "install") })

	t.Run("image swap", func(t *testing.T) { checkImageSwap(t) })
	t.Run("the sync rode out kube-apiserver's restart", func(t *testing.T) { checkSyncNotRestarted(t, "install's control-plane step") })
	t.Run("kube-proxy step with a node without yurthub", func(t *testing.T) {
		// yurthub runs on worker-1 as yurtadm's service, not on master-1.
		if !strings.Contains(out, "[kube-proxy] skipped: yurthub does not run on master-1") {
			t.Errorf("the kube-proxy step on a cluster with a node without yurthub must be skipped with the reason; install said:\n%s", out)
		}
		checkKubeProxyHealthy(t, testStarted)
	})
	t.Run("control plane restarted with the new flags", func(t *testing.T) {
		checkStaticPod(t, "kube-apiserver", "--kubelet-preferred-address-types=Hostname,InternalIP,ExternalIP")
	})
	t.Run("kube-controller-manager left alone on OpenYurt v1.7.0", func(t *testing.T) {
		now := kubeadmState(t)
		for _, n := range kc.ControlPlanes() {
			kcm := "manifest/" + n.Name + "/kube-controller-manager.yaml"
			if now[kcm] != before[kcm] {
				t.Errorf("kube-controller-manager's manifest on %s changed: %s, before install %s", n.Name, now[kcm], before[kcm])
			}
		}
		if !strings.Contains(out, "kube-controller-manager left as it is: OpenYurt v1.7.0") {
			t.Errorf("the control-plane step does not say why it left kube-controller-manager; install said:\n%s", out)
		}
	})
	t.Run("yurt-tunnel-server's DNS controller off", func(t *testing.T) { checkTunnelDNSOff(t, out) })
	t.Run("records served from their shards", func(t *testing.T) { checkShardsServed(t) })
	t.Run("node names in both families", func(t *testing.T) { checkBothFamilies(t) })
	t.Run("node names from the apiserver's view", func(t *testing.T) { checkAPIServerView(t) })
	t.Run("the tunnel path", func(t *testing.T) { checkTunnelPath(t) })
	t.Run("every apiserver reaches each site's node by name", func(t *testing.T) { checkEveryAPIServerReachesTheSites(t) })
	t.Run("node names from every control-plane node's own resolver", func(t *testing.T) {
		// master-1's /etc/hosts names it on 127.0.1.1 too (as Debian's
		// installer writes it), so its own resolver, as kube-apiserver's,
		// answers that as well: the check names it (exit 2), as it is why
		// the apiserver's node proxy refuses master-1. worker-1 resolves
		// through DNS alone, to the tunnel.
		out, err := runSync(t, "status", "--verify-dns-from-control-plane")
		if err == nil || !strings.Contains(out, "From control-plane node master-1") ||
			!regexp.MustCompile(`(?m)^master-1\s+cloud 127\.0\.1\.1,198\.51\.100\.10 .*MISMATCH$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^worker-1\s+edge .* OK$`).MatchString(out) {
			t.Errorf("status --verify-dns-from-control-plane (%v) must name master-1's loopback address and find worker-1 right:\n%s", err, out)
		}
		if left, _ := kc.Kubectl(ctx, "-n", "kube-system", "get", "jobs,serviceaccounts,roles", "-o", "name"); strings.Contains(left, "verify-dns") {
			t.Errorf("the check left objects behind:\n%s", left)
		}
	})

	podsBefore, stranded := checkNodeLocalDNS(t)

	asking := append(podsBefore, stranded...)
	podProbes := probeSet{startProbe("", probeName, "", askers(asking)), startProbe("each one's IPv6 nameserver", probeName, "", askersOverIPv6(asking))}
	out = revertExactly(t, before)
	podProbes.finish(t, "revert, asked from pods made before node-local DNS and from those still resolving at "+nodelocal.Address.String())
	t.Run("revert leaves a forwarder for the pods that resolve there", func(t *testing.T) { checkLeftover(t, out, stranded) })
	if now := serviceMonitors(t); now != monitorsBefore {
		t.Errorf("the ServiceMonitors after revert:\n%s\nbefore install:\n%s", now, monitorsBefore)
	}
	checkReverted(t, ctx, testStarted)
}

// checkSyncNotRestarted: no container of tunnel-nodes-sync's pods has
// restarted: the sync waits for an apiserver that restarts (the
// control-plane step, kubeadm upgrade) and campaigns again, instead of
// exiting into the kubelet's back-off.
func checkSyncNotRestarted(t *testing.T, through string) {
	t.Helper()
	pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tunnel-nodes-sync"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("tunnel-nodes-sync's pods: %v (%d)", err, len(pods.Items))
	}
	restarts := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount > 0 {
				restarts += int(c.RestartCount)
				t.Errorf("through %s, %s's container %s restarted %d times (last: %+v)", through, p.Name, c.Name, c.RestartCount, c.LastTerminationState.Terminated)
			}
		}
	}
	t.Logf("through %s: %d tunnel-nodes-sync pods, %d restarts", through, len(pods.Items), restarts)
}

// checkShardsServed: the sync wrote the records' shard set (one name a
// node, in one shard), status says so, and every coredns-yurt pod serves the shards (its
// coredns_yurthosts_shards metric), not the single ConfigMap.
func checkShardsServed(t *testing.T) {
	ctx := context.Background()
	harness.Eventually(t, 30*time.Second, func() error {
		out, err := runSync(t, "status")
		want := fmt.Sprintf("yurt-tunnel-nodes: %d names in 1 shard; the records fit in the single ConfigMap", len(kc.Nodes))
		if err != nil || !strings.Contains(out, want) {
			return fmt.Errorf("status (%v):\n%s", err, out)
		}
		return nil
	})
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || len(p.OwnerReferences) == 0 || p.OwnerReferences[0].Kind != "DaemonSet" {
			continue
		}
		harness.Eventually(t, 10*time.Second, func() error {
			metrics, err := cs.CoreV1().RESTClient().Get().Namespace("kube-system").Resource("pods").Name(p.Name + ":9153").
				SubResource("proxy").Suffix("metrics").DoRaw(ctx)
			if err != nil {
				return err
			}
			if want := `coredns_yurthosts_shards{configmap="kube-system/yurt-tunnel-nodes"} 1`; !strings.Contains(string(metrics), want) {
				return fmt.Errorf("pod %s on %s: no %q in its metrics", p.Name, p.Spec.NodeName, want)
			}
			return nil
		})
		served++
	}
	if served != len(kc.Nodes) {
		t.Errorf("%d coredns-yurt pods serve the shards, want one per node (%d)", served, len(kc.Nodes))
	}
}

// checkImageSwap: make image's coredns-yurt runs as the DaemonSet on both
// nodes — uid 65532, read-only root, only NET_BIND_SERVICE, in-cluster
// config — and tunnel-nodes-sync as its Deployment.
func checkImageSwap(t *testing.T) {
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	onNode := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || len(p.OwnerReferences) == 0 || p.OwnerReferences[0].Kind != "DaemonSet" {
			continue
		}
		if !cluster.PodReady(&p) {
			t.Errorf("DaemonSet pod %s on %s is not Ready", p.Name, p.Spec.NodeName)
			continue
		}
		onNode[p.Spec.NodeName] = true
		c := p.Spec.Containers[0]
		if !strings.HasPrefix(c.Image, "docker.io/yurtdns/coredns-yurt:") {
			t.Errorf("pod %s runs %s", p.Name, c.Image)
		}
		if p.Spec.NodeName != kc.Master().Name {
			continue // the processes of one node are enough for what follows
		}
		pid := containerProcess(t, &p)
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "CapBnd:\t0000000000000400", "CapEff:\t0000000000000400"} {
			if !strings.Contains(string(status), want) {
				t.Errorf("coredns-yurt process %d: want %q in /proc/PID/status:\n%s", pid, want, status)
			}
		}
		mounts, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", pid))
		if !rootReadOnly(string(mounts)) {
			t.Errorf("coredns-yurt's root filesystem is not read-only:\n%s", mounts)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/root/var/run/secrets/kubernetes.io/serviceaccount/token", pid)); err != nil {
			t.Errorf("coredns-yurt has no in-cluster credentials: %v", err)
		}
	}
	for _, n := range kc.Nodes {
		if !onNode[n.Name] {
			t.Errorf("no Ready coredns-yurt DaemonSet pod on %s", n.Name)
		}
	}
	waitSyncAvailable(t)
}

// containerProcess finds the process of a pod's first container on master-1
// by the container ID the kubelet reports: runc names the cgroup after it.
func containerProcess(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", p.Name)
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	pid, err := kc.Master().ProcessOfContainer(id)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func rootReadOnly(mounts string) bool {
	for _, line := range strings.Split(mounts, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && f[1] == "/" {
			return strings.HasPrefix(f[3], "ro,") || f[3] == "ro"
		}
	}
	return false
}

// checkKubeProxyHealthy: every kube-proxy pod Ready, not restarted since
// the test began (but on a node rebooted while cut off: there it exits
// until it reaches the apiserver; and once by a kubelet restart, which
// kubeadm upgrade's procedure does: a container the old kubelet was
// starting as it stopped runs again under the new one), and its log free
// of configuration errors.
func checkKubeProxyHealthy(t *testing.T, testStarted time.Time) {
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != len(kc.Nodes) {
		t.Errorf("%d kube-proxy pods, want one per node", len(pods.Items))
	}
	for _, p := range pods.Items {
		c := p.Status.ContainerStatuses[0]
		if !cluster.PodReady(&p) {
			t.Errorf("kube-proxy %s on %s not Ready", p.Name, p.Spec.NodeName)
		}
		if last := c.LastTerminationState.Terminated; last != nil && !last.FinishedAt.Time.Before(testStarted) && !rebootedCutOff[p.Spec.NodeName] {
			previous, err := kc.Node(p.Spec.NodeName).ContainerLog(p.Namespace, p.Name, c.Name, c.RestartCount-1)
			if err != nil {
				previous = err.Error()
			}
			report := fmt.Sprintf("kube-proxy %s on %s: restarts %d%s; the end of the log before its last restart:\n%s",
				p.Name, p.Spec.NodeName, c.RestartCount, lastExit(c), lastLines(previous, 15))
			if c.RestartCount == 1 && kc.Node(p.Spec.NodeName).KubeletStartedWithin(last.FinishedAt.Time, 2*time.Minute, 10*time.Second) {
				t.Logf("restarted as the node's kubelet restarted: %s", report)
			} else {
				t.Error(report)
			}
		}
		// From the node's log files: kubectl logs of a pod on an edge node goes
		// through the tunnel, which is not part of this test.
		logs, err := kc.Node(p.Spec.NodeName).PodLogs(p.Namespace, p.Name)
		if err != nil {
			t.Error(err)
		}
		for _, bad := range []string{"invalid configuration", "unknown field", "failed to load", "error loading config"} {
			if strings.Contains(strings.ToLower(logs), bad) {
				t.Errorf("kube-proxy %s logs %q:\n%s", p.Name, bad, logs)
			}
		}
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// checkStaticPod: the kubelet restarted the component from its patched
// manifest — its mirror pod shows the flag and is Ready, its process runs
// with it.
func checkStaticPod(t testing.TB, component, flag string) {
	ctx := context.Background()
	name := component + "-" + kc.Master().Name
	p, err := cs.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(p.Spec.Containers[0].Command, " "), flag) {
		t.Errorf("%s's mirror pod lacks %s: %v", name, flag, p.Spec.Containers[0].Command)
	}
	if !cluster.PodReady(p) {
		t.Errorf("%s is not Ready", name)
	}
	pid, err := kc.Master().ContainerPID(component)
	if err != nil {
		t.Fatal(err)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !strings.Contains(string(cmdline), flag) {
		t.Errorf("the running %s (pid %d) lacks %s", component, pid, flag)
	}
}

// checkAPIServerView: from the apiserver's network namespace and resolv.conf
// (ClusterFirstWithHostNet), worker-1 resolves to the tunnel ClusterIP and
// master-1 to its InternalIP; a node added and the tunnel Service recreated
// are answered there within 1 s.
func checkAPIServerView(t *testing.T) {
	ctx := context.Background()
	r, err := kc.Master().ResolverOf("kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the apiserver's resolver: nameservers %v, search %v, ndots %d", r.Nameservers, r.Search, r.Ndots)
	if r.Nameservers[0] != cluster.KubeDNSIP() {
		t.Errorf("the apiserver resolves through %s, not the kube-dns Service: dnsPolicy ClusterFirstWithHostNet is not live", r.Nameservers[0])
	}
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// expect waits for the first right answer within the limit, then keeps
	// asking for settle: an answer cached before the change by the other
	// replica's cache plugin (kubeadm's Corefile has "cache 30", capped by
	// yurthosts' 5 s TTL) may still come; it reports when the last wrong
	// one came.
	expect := func(name, want string, within, settle time.Duration) (first, lastWrong time.Duration) {
		t.Helper()
		start := time.Now()
		for {
			addrs, q, err := r.LookupA(ctx, name)
			right := err == nil && len(addrs) == 1 && addrs[0] == want
			switch {
			case right && first == 0:
				first = time.Since(start)
			case !right && first == 0 && time.Since(start) > within:
				t.Errorf("%s from the apiserver's view = %v (asked %s, %v), want %s within %s", name, addrs, q, err, want, within)
				return time.Since(start), time.Since(start)
			case !right && first != 0:
				lastWrong = time.Since(start)
			}
			if first != 0 && time.Since(start) > first+settle {
				return first, lastWrong
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	const ttl = 5 * time.Second // yurthosts' default
	expect("worker-1", svc.Spec.ClusterIP, time.Minute, 0)
	expect("master-1", kc.Master().IP, time.Second, 0)

	if err := cluster.CreateNodeObject(ctx, cs, "worker-2", "198.51.100.12", map[string]string{tunnelnodes.EdgeNodeLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Nodes().Delete(ctx, "worker-2", metav1.DeleteOptions{})
	first, lastWrong := expect("worker-2", svc.Spec.ClusterIP, time.Second, ttl+time.Second)
	t.Logf("node worker-2 added: answered from the apiserver's view in %s", first.Round(time.Millisecond))
	if lastWrong > 0 {
		t.Errorf("worker-2 answered wrong again %s after it was added", lastWrong.Round(time.Millisecond))
	}

	recreated := recreateTunnelService(t)
	first, lastWrong = expect("worker-1", recreated.Spec.ClusterIP, time.Second, ttl+time.Second)
	t.Logf("tunnel Service recreated (%s → %s): first answered in %s, every answer right after %s (the other replica's cache holds the old one up to the %s TTL)",
		svc.Spec.ClusterIP, recreated.Spec.ClusterIP, first.Round(time.Millisecond), max(first, lastWrong).Round(time.Millisecond), ttl)
	if lastWrong > ttl+time.Second {
		t.Errorf("worker-1 still answered the old ClusterIP %s after the recreation", lastWrong.Round(time.Millisecond))
	}
}

// checkReverted: the stock Deployment serves, and what install created is gone.
func checkReverted(t *testing.T, ctx context.Context, testStarted time.Time) {
	if _, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("DaemonSet coredns after revert: %v", err)
	}
	if _, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "node-local-dns", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("DaemonSet node-local-dns after revert: %v", err)
	}
	if _, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns-upstream", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service kube-dns-upstream after revert: %v", err)
	}
	for _, n := range kc.Nodes {
		if out, _ := n.NetCommand(ctx, "ip", "-o", "addr", "show", "dev", "lo").CombinedOutput(); strings.Contains(string(out), nodelocal.Address.String()) {
			t.Errorf("%s still has %s on lo after revert:\n%s", n.Name, nodelocal.Address, out)
		}
	}
	for _, cm := range []string{"coredns-yurt", "node-local-dns", "yurtdns-install-state"} {
		if _, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, cm, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s after revert: %v", cm, err)
		}
	}
	if _, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment tunnel-nodes-sync after revert: %v", err)
	}
	if _, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the sync's Lease after revert: %v", err)
	}
	dep, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Status.ReadyReplicas != *dep.Spec.Replicas {
		t.Errorf("Deployment coredns: %d of %d ready", dep.Status.ReadyReplicas, *dep.Spec.Replicas)
	}
	for _, n := range kc.Nodes {
		if err := n.WaitDNS(ctx, probeName, 10*time.Second); err != nil {
			t.Error(err)
		}
	}
	checkKubeProxyHealthy(t, testStarted)
}

// waitSyncAvailable waits for the Deployment of make image's
// tunnel-nodes-sync that install's last step creates; its pods start right
// after the control-plane step restarted kube-apiserver, the controller
// manager and the scheduler.
func waitSyncAvailable(t *testing.T) {
	t.Helper()
	start := time.Now()
	for {
		dep, err := cs.AppsV1().Deployments("kube-system").Get(context.Background(), "tunnel-nodes-sync", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "docker.io/yurtdns/tunnel-nodes-sync:") {
			t.Errorf("tunnel-nodes-sync runs %s", img)
		}
		if dep.Status.AvailableReplicas > 0 {
			t.Logf("tunnel-nodes-sync available %s after install", time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("tunnel-nodes-sync: no replica available after 2m: %+v", dep.Status)
		}
		time.Sleep(time.Second)
	}
}
