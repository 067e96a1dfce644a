package realcluster

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/internal/nodelocal/leftover"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podNetns is a pause pod on a node, asked from inside its network
// namespace with the server its resolv.conf names, as its programs would.
type podNetns struct {
	name, node string
	pid        int
	resolver   string
}

// startPausePod runs a pause pod on node and finds its network namespace
// and resolv.conf server.
func startPausePod(t testing.TB, name, node string) podNetns {
	t.Helper()
	runPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: corev1.PodSpec{NodeName: node, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "pause", Image: kc.PauseImage(), ImagePullPolicy: corev1.PullNever}}},
	})
	p, err := cs.CoreV1().Pods("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	pid, err := kc.Node(node).ProcessOfContainer(id)
	if err != nil {
		t.Fatal(err)
	}
	resolver, err := resolvConfServer(pid)
	if err != nil {
		t.Fatal(err)
	}
	return podNetns{name: name, node: node, pid: pid, resolver: resolver}
}

func (p podNetns) dig(ctx context.Context, server, name, qtype string, extra ...string) (harness.DigResult, error) {
	return harness.DigWith(func(args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(p.pid), "-n", "dig"}, args...)...).CombinedOutput()
	}, server, name, qtype, extra...)
}

func (p podNetns) asker() asker { return asker{where: "pod " + p.name, server: p.resolver, dig: p.dig} }

func askers(pods []podNetns) []asker {
	var a []asker
	for _, p := range pods {
		a = append(a, p.asker())
	}
	return a
}

// checkNodeLocalDNS runs on an installed cluster: install --node-local-dns
// with pods on both nodes asking their DNS every 100 ms; then new pods
// resolve at the node-local address, cluster names and node names, also on
// worker-1 rebooted while cut off from master-1. It returns the pods whose
// DNS the caller's revert must not break: made before and untouched since,
// and those that resolve at the node-local address (made under it, or on
// the rebooted node).
func checkNodeLocalDNS(t *testing.T) (before, stranded []podNetns) {
	ctx := context.Background()
	local := nodelocal.Address.String()
	// The tunnel up, as on an OpenYurt cluster: install and status read
	// worker-1's kubelet (its /configz) through it.
	waitTunnelEndpoints(t, 5*time.Minute)
	for _, n := range kc.Nodes {
		before = append(before, startPausePod(t, "dns-before-"+n.Name, n.Name))
	}
	out, err := runSync(t, "install", "--control-plane-jobs", "--node-local-dns", "--dry-run")
	for _, want := range []string{`\[node-local-dns\] would: created .*DaemonSet kube-system/node-local-dns`,
		"switched the kubelet clusterDNS of master-1, worker-1 to " + regexp.QuoteMeta(local),
		`(?m)^\+\s*- ` + regexp.QuoteMeta(local) + `$`} {
		if err != nil || !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("install --node-local-dns --dry-run does not say %s (%v):\n%s", want, err, out)
		}
	}
	probe := startProbe("", probeName, "", askers(before))
	started := time.Now()
	_, err = runSync(t, "install", "--control-plane-jobs", "--node-local-dns")
	probe.finish(t, "install --node-local-dns, asked from pods made before")
	if err != nil {
		t.Fatalf("install --node-local-dns: %v", err)
	}
	t.Logf("install --node-local-dns took %s", time.Since(started).Round(100*time.Millisecond))

	out, err = runSync(t, "install", "--control-plane-jobs", "--node-local-dns")
	if err != nil || !strings.Contains(out, "[node-local-dns] already applied") {
		t.Errorf("a second install --node-local-dns: want the step already applied (%v):\n%s", err, out)
	}
	out, err = runSync(t, "status")
	// worker-1's kubelet lists (the harness sets WatchListClient off on
	// edge kubelets), so status has nothing to warn about.
	if strings.Contains(out, "watch-list") {
		t.Errorf("status warns about a kubelet's watch-list:\n%s", out)
	}
	for _, n := range kc.Nodes {
		if want := n.Name + ": cache Ready; kubelet clusterDNS " + local; err != nil || !strings.Contains(out, want) {
			t.Errorf("status does not say %q (%v):\n%s", want, err, out)
		}
	}

	// The Corefile as an earlier version wrote it: status names it (a
	// comment only, so the caches reloading it answer as before).
	cms := cs.CoreV1().ConfigMaps(tunnelnodes.Namespace)
	cm, err := cms.Get(ctx, "node-local-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	installed := cm.Data["Corefile"]
	cm.Data["Corefile"] = "# an earlier version's\n" + installed
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := runSync(t, "status"); err == nil || !strings.Contains(out, "node-local-dns     drifted (not as this version installs: ConfigMap kube-system/node-local-dns") {
		t.Errorf("status with an earlier version's node-local Corefile (%v):\n%s", err, out)
	}
	cm.Data["Corefile"] = installed
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The answers every pod must get: what kube-dns says, from a node.
	want := map[string]string{}
	for _, name := range []string{probeName, "master-1", "worker-1"} {
		r, err := kc.Master().Dig(ctx, cluster.KubeDNSIP(), name, "A")
		if err != nil || len(r.Data("A")) != 1 {
			t.Fatalf("kube-dns on %s: %v %v", name, r.Data("A"), err)
		}
		want[name] = r.Data("A")[0]
	}
	tunnel, err := cs.CoreV1().Services("kube-system").Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
	if err != nil || want["worker-1"] != tunnel.Spec.ClusterIP {
		t.Errorf("worker-1 (edge) answered %s by kube-dns, want the tunnel ClusterIP (%v)", want["worker-1"], err)
	}
	var after []podNetns
	for _, n := range kc.Nodes {
		p := startPausePod(t, "dns-after-"+n.Name, n.Name)
		if p.resolver != local {
			t.Errorf("pod %s made after install resolves at %q, want %s", p.name, p.resolver, local)
		}
		for name, addr := range want {
			r, err := p.dig(ctx, local, name, "A", "+time=1", "+tries=1")
			if err != nil || strings.Join(r.Data("A"), ",") != addr {
				t.Errorf("pod %s: %s at %s = %v (%v), want %s", p.name, name, local, r.Data("A"), err, addr)
			}
		}
		after = append(after, p)
	}

	// A reboot remakes every pod's sandbox, so dns-before-worker-1 now
	// resolves at the node-local address too.
	t.Run("worker-1 rebooted while cut off from master-1", func(t *testing.T) {
		rebootWhileCutOff(t, after[1].name, local, rebootNames(t), 90*time.Second, true, nil)
	})
	for _, p := range []*podNetns{&after[1], &before[1]} {
		pid, err := kc.Node(p.node).PodPID(ctx, "kube-system", p.name)
		if err != nil {
			t.Fatal(err)
		}
		p.pid = pid
	}

	// Those pods keep resolving at the node-local address: the caller's
	// revert must answer them too, and leave a forwarder until they go.
	return before[:1], append(after, before[1])
}

// checkLeftover runs after the revert of checkNodeLocalDNS's cluster with
// the pods that still resolve at the node-local address (stranded) running:
// revert named them and handed the address to the leftover forwarder, which
// status shows; once they are deleted the leftover goes by itself, and the
// address is off every node's lo.
func checkLeftover(t *testing.T, out string, stranded []podNetns) {
	ctx := context.Background()
	if want := "handed the address over to DaemonSet kube-system/node-local-dns-leftover on master-1, worker-1"; !strings.Contains(out, want) {
		t.Errorf("revert does not say %q:\n%s", want, out)
	}
	for _, p := range stranded {
		if !strings.Contains(out, "kube-system/"+p.name) {
			t.Errorf("revert does not name pod %s, which still resolves at %s:\n%s", p.name, nodelocal.Address, out)
		}
	}
	if status, _ := runSync(t, "status"); !strings.Contains(status, "leftover forwarder on "+nodelocal.Address.String()+" for pods still resolving there: master-1 (1 pods), worker-1 (2 pods)") {
		t.Errorf("status after revert does not show the leftover:\n%s", status)
	}
	for _, p := range stranded {
		grace := int64(0)
		if err := cs.CoreV1().Pods("kube-system").Delete(ctx, p.name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			t.Fatal(err)
		}
		waitPodGone(t, p.name)
	}
	started := time.Now()
	harness.Eventually(t, 2*time.Minute, func() error {
		if _, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, leftover.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("DaemonSet %s still there (%v)", leftover.Name, err)
		}
		if _, err := cs.RbacV1().ClusterRoles().Get(ctx, leftover.ClusterRole, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ClusterRole %s still there (%v)", leftover.ClusterRole, err)
		}
		if _, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, leftover.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ConfigMap %s still there (%v)", leftover.Name, err)
		}
		for _, n := range kc.Nodes {
			if out, _ := n.NetCommand(ctx, "ip", "-o", "addr", "show", "dev", "lo").CombinedOutput(); strings.Contains(string(out), nodelocal.Address.String()) {
				return fmt.Errorf("%s still has %s on lo:\n%s", n.Name, nodelocal.Address, out)
			}
		}
		return nil
	})
	t.Logf("the leftover forwarder went %s after the last pod resolving at %s", time.Since(started).Round(100*time.Millisecond), nodelocal.Address)
}

// cutOff drops, in a's network namespace, everything to and from b and b's
// pods (an edge node whose link to the cloud is down); the returned func
// puts the link back.
func cutOff(t testing.TB, a, b *cluster.Node) func() {
	t.Helper()
	var rules [][]string
	for _, net := range []string{b.IP, b.PodCIDR} {
		rules = append(rules, []string{"OUTPUT", "-d", net}, []string{"INPUT", "-s", net}, []string{"FORWARD", "-d", net}, []string{"FORWARD", "-s", net})
	}
	iptables := func(op string, rule []string) error {
		args := append([]string{"-w", op, rule[0]}, rule[1:]...)
		if out, err := a.NetCommand(context.Background(), "iptables", append(args, "-j", "DROP")...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %v: %v: %s", args, err, out)
		}
		return nil
	}
	inserted := 0
	undo := func() {
		for _, r := range rules[:inserted] {
			if err := iptables("-D", r); err != nil {
				t.Error(err)
			}
		}
	}
	for _, r := range rules {
		if err := iptables("-I", r); err != nil {
			undo()
			t.Fatal(err)
		}
		inserted++
	}
	return undo
}

// runningClusterDNS is what the node's kubelet runs with (its /configz,
// read as install reads it: through yurt-tunnel for an edge node).
func runningClusterDNS(t *testing.T, node string) string {
	t.Helper()
	raw, err := kube.KubeletConfigz(context.Background(), cs, node)
	if err != nil {
		t.Fatalf("configz of %s: %v", node, err)
	}
	_, rest, _ := strings.Cut(string(raw), `"clusterDNS":[`)
	dns, _, _ := strings.Cut(rest, "]")
	return strings.Trim(dns, `"`)
}
