package realcluster

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
	resolver   string   // the first nameserver of its resolv.conf
	resolvers  []string // all of them
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
	resolvers, err := resolvConfServers(pid)
	if err != nil {
		t.Fatal(err)
	}
	return podNetns{name: name, node: node, pid: pid, resolver: resolvers[0], resolvers: resolvers}
}

func (p podNetns) dig(ctx context.Context, server, name, qtype string, extra ...string) (harness.DigResult, error) {
	return harness.DigWith(func(args ...string) ([]byte, error) {
		return p.digCommand(ctx, args...).CombinedOutput()
	}, server, name, qtype, extra...)
}

// digCommand runs dig in the pod's network namespace (nsenter execs it:
// its PID is dig's).
func (p podNetns) digCommand(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(p.pid), "-n", "dig"}, args...)...)
}

func (p podNetns) asker() asker { return p.askerAt(p.resolver) }

// askerAt asks server from the pod's network namespace.
func (p podNetns) askerAt(server string) asker {
	return asker{where: "pod " + p.name, server: server, digCommand: func(args ...string) *exec.Cmd {
		return p.digCommand(context.Background(), args...)
	}}
}

func askers(pods []podNetns) []asker {
	var a []asker
	for _, p := range pods {
		a = append(a, p.asker())
	}
	return a
}

// askersOverIPv6 ask from each pod its IPv6 nameserver: the last of its
// resolv.conf when that is IPv6 (the node-local cache's under NodeLocal DNS
// on both families), else kube-dns's IPv6 ClusterIP.
func askersOverIPv6(pods []podNetns) []asker {
	var a []asker
	for _, p := range pods {
		server := cluster.KubeDNSIP6()
		if last := p.resolvers[len(p.resolvers)-1]; strings.Contains(last, ":") {
			server = last
		}
		a = append(a, p.askerAt(server))
	}
	return a
}

// checkNodeLocalDNS runs on an installed cluster: install --node-local-dns
// with pods on both nodes asking their DNS every probeEvery; then new pods
// resolve at the node-local address, cluster names and node names, also on
// worker-1 rebooted while cut off from the cloud. It returns the pods whose
// DNS the caller's revert must not break: made before and untouched since,
// and those that resolve at the node-local address (made under it, or on
// the rebooted node).
func checkNodeLocalDNS(t *testing.T) (before, stranded []podNetns) {
	ctx := context.Background()
	locals := nodeLocalAddresses(t)
	local, all := locals[0], strings.Join(locals, ",")
	// The tunnel up, as on an OpenYurt cluster: install and status read
	// worker-1's kubelet (its /configz) through it.
	waitTunnelEndpoints(t, 5*time.Minute)
	for _, n := range kc.Nodes {
		before = append(before, startPausePod(t, "dns-before-"+n.Name, n.Name))
	}
	out, err := runSync(t, "install", "--control-plane-jobs", "--node-local-dns", "--dry-run")
	var names []string
	for _, n := range kc.Nodes {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	wants := []string{`\[node-local-dns\] would: created .*DaemonSet kube-system/node-local-dns`,
		"switched the kubelet clusterDNS of " + strings.Join(names, ", ") + " to " + regexp.QuoteMeta(all)}
	for _, l := range locals {
		wants = append(wants, `(?m)^\+\s*- `+regexp.QuoteMeta(l)+`$`)
	}
	for _, want := range wants {
		if err != nil || !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("install --node-local-dns --dry-run does not say %s (%v):\n%s", want, err, out)
		}
	}
	probes := probeSet{startProbe("", probeName, "", askers(before)), startProbe("each one's IPv6 nameserver", probeName, "", askersOverIPv6(before))}
	started := time.Now()
	_, err = runSync(t, "install", "--control-plane-jobs", "--node-local-dns")
	probes.finish(t, "install --node-local-dns, asked from pods made before")
	if err != nil {
		t.Fatalf("install --node-local-dns: %v", err)
	}
	t.Logf("install --node-local-dns took %s", time.Since(started).Round(100*time.Millisecond))

	// master-1's /etc/hosts names it on 127.0.1.1, as Debian's installer
	// does: the apiserver (now dialling nodes by name) will not proxy to it,
	// so its /configz cannot be read back; the second install's Job reads
	// its kubelet file and start instead, and restarts no kubelet.
	again := time.Now()
	out, err = runSync(t, "install", "--control-plane-jobs", "--node-local-dns")
	if err != nil || !strings.Contains(out, "[node-local-dns] already applied") {
		t.Errorf("a second install --node-local-dns: want the step already applied (%v):\n%s", err, out)
	}
	for _, n := range kc.Nodes {
		if n.KubeletStartedWithin(again, 0, time.Hour) {
			t.Errorf("the second install --node-local-dns restarted %s's kubelet", n.Name)
		}
	}
	out, err = runSync(t, "status")
	// worker-1's kubelet lists (the harness sets WatchListClient off on
	// edge kubelets), so status has nothing to warn about.
	if strings.Contains(out, "watch-list") {
		t.Errorf("status warns about a kubelet's watch-list:\n%s", out)
	}
	for _, n := range kc.Nodes {
		readBack := n.Name + ": cache Ready; kubelet clusterDNS " + all
		// A cloud node's /configz cannot be read back through its own
		// apiserver, which resolves the node's name to 127.0.1.1; through
		// another control-plane node's (the load balancer's pick) it can.
		notReadBack := n.Name + ": cache Ready; kubelet switched to " + all + " by install, not read back: "
		refused := "the apiserver's node proxy refuses node " + n.Name
		switch {
		case err != nil:
			t.Errorf("status exits %v:\n%s", err, out)
		case strings.Contains(out, readBack):
		case n.Edge || !strings.Contains(out, notReadBack) || !strings.Contains(out, refused) || !strings.Contains(out, "127.0.1.1 "+n.Name):
			t.Errorf("status does not say %q (or, for a cloud node, %q and name the /etc/hosts line):\n%s", readBack, notReadBack, out)
		}
	}

	// Each cache reads the records through yurthub, with its node's
	// identity, where the node runs yurthub (an edge node), else with its
	// ServiceAccount token.
	for _, n := range kc.Nodes {
		want := "no yurthub on this node"
		if n.Edge {
			want = "reading through yurthub at http://169.254.2.1:10261 with the node's identity"
		}
		harness.Eventually(t, 10*time.Second, func() error {
			pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=node-local-dns", FieldSelector: "spec.nodeName=" + n.Name})
			if err != nil || len(pods.Items) != 1 {
				return fmt.Errorf("node-local-dns pods on %s: %v (%d)", n.Name, err, len(pods.Items))
			}
			logs, err := n.PodLogs("kube-system", pods.Items[0].Name)
			if err != nil || !strings.Contains(logs, want) {
				return fmt.Errorf("the cache on %s does not log %q (%v):\n%s", n.Name, want, err, logs)
			}
			return nil
		})
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

	// The answers every pod must get: what kube-dns says, from a node, A
	// and AAAA ("" for NODATA).
	want := map[string]map[string]string{"A": {}, "AAAA": {}}
	for _, name := range []string{probeName, "master-1", "worker-1"} {
		for qtype := range want {
			r, err := kc.Master().Dig(ctx, cluster.KubeDNSIP(), name, qtype)
			if err != nil || r.Status != "NOERROR" || qtype == "A" && len(r.Data("A")) != 1 {
				t.Fatalf("kube-dns on %s %s: %s %v %v", name, qtype, r.Status, r.Data(qtype), err)
			}
			want[qtype][name] = strings.Join(r.Data(qtype), ",")
		}
	}
	tunnel, err := cs.CoreV1().Services("kube-system").Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
	if err != nil || want["A"]["worker-1"] != tunnel.Spec.ClusterIP {
		t.Errorf("worker-1 (edge) answered %s by kube-dns, want the tunnel ClusterIP (%v)", want["A"]["worker-1"], err)
	}
	var after []podNetns
	for _, n := range kc.Nodes {
		p := startPausePod(t, "dns-after-"+n.Name, n.Name)
		if !slices.Equal(p.resolvers, locals) {
			t.Errorf("pod %s made after install resolves at %q, want %q", p.name, p.resolvers, locals)
		}
		for _, server := range locals {
			for qtype, answers := range want {
				for name, addrs := range answers {
					r, err := p.dig(ctx, server, name, qtype, "+time=1", "+tries=1")
					if err != nil || r.Status != "NOERROR" || strings.Join(r.Data(qtype), ",") != addrs {
						t.Errorf("pod %s: %s %s at %s = %s %v (%v), want NOERROR %q", p.name, name, qtype, server, r.Status, r.Data(qtype), err, addrs)
					}
				}
			}
		}
		after = append(after, p)
	}

	// A reboot remakes every pod's sandbox, so dns-before-worker-1 now
	// resolves at the node-local address too.
	// yurthub stayed healthy through cuts of 30 s and of a minute here: the
	// reboots below are what exercise its return.
	// before and after hold a pod per node, in kc.Nodes' order.
	w := slices.IndexFunc(kc.Nodes, func(n *cluster.Node) bool { return n.Name == "worker-1" })
	t.Run("worker-1 cut off from the cloud", func(t *testing.T) {
		rebootWhileCutOff(t, after[w].name, local, rebootNames(t), 30*time.Second, 0, true, nil)
	})
	t.Run("worker-1 rebooted twice while cut off from the cloud", func(t *testing.T) {
		rebootWhileCutOff(t, after[w].name, local, rebootNames(t), 90*time.Second, 2, true, nil)
	})
	for _, p := range []*podNetns{&after[w], &before[w]} {
		pid, err := kc.Node(p.node).PodPID(ctx, "kube-system", p.name)
		if err != nil {
			t.Fatal(err)
		}
		p.pid = pid
	}

	// Those pods keep resolving at the node-local address: the caller's
	// revert must answer them too, and leave a forwarder until they go.
	return slices.Delete(slices.Clone(before), w, w+1), append(after, before[w])
}

// nodeLocalAddresses are the caches' addresses: one per IP family of the
// cluster (kube-dns's), IPv4 first on the test cluster.
func nodeLocalAddresses(t testing.TB) []string {
	kubeDNS, err := cs.CoreV1().Services(tunnelnodes.Namespace).Get(context.Background(), "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return nodelocal.Strings(nodelocal.Addresses(kubeDNS.Spec.IPFamilies))
}

// checkLeftover runs after the revert of checkNodeLocalDNS's cluster with
// the pods that still resolve at the node-local address (stranded) running:
// revert named them and handed the address to the leftover forwarder, which
// status shows; once they are deleted the leftover goes by itself, and the
// address is off every node's lo.
func checkLeftover(t testing.TB, out string, stranded []podNetns) {
	ctx := context.Background()
	perNode := map[string]int{}
	for _, p := range stranded {
		perNode[p.node]++
	}
	var nodes, counts []string
	for _, n := range slices.Sorted(maps.Keys(perNode)) {
		nodes, counts = append(nodes, n), append(counts, fmt.Sprintf("%s (%d pods)", n, perNode[n]))
	}
	if want := "handed the address over to DaemonSet kube-system/node-local-dns-leftover on " + strings.Join(nodes, ", "); !strings.Contains(out, want) {
		t.Errorf("revert does not say %q:\n%s", want, out)
	}
	for _, p := range stranded {
		if !strings.Contains(out, "kube-system/"+p.name) {
			t.Errorf("revert does not name pod %s, which still resolves at %s:\n%s", p.name, nodelocal.Address, out)
		}
	}
	locals := nodeLocalAddresses(t)
	if status, _ := runSync(t, "status"); !strings.Contains(status, "leftover forwarder on "+strings.Join(locals, ",")+" for pods still resolving there: "+strings.Join(counts, ", ")) {
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
			out, _ := n.NetCommand(ctx, "ip", "-o", "addr", "show", "dev", "lo").CombinedOutput()
			for _, l := range locals {
				if strings.Contains(string(out), l+"/") {
					return fmt.Errorf("%s still has %s on lo:\n%s", n.Name, l, out)
				}
			}
		}
		return nil
	})
	t.Logf("the leftover forwarder went %s after the last pod resolving at %s", time.Since(started).Round(100*time.Millisecond), nodelocal.Address)
}

// cutOff drops, in a's network namespace, everything to and from the
// cloud: its nodes and their pods, and the control-plane endpoint, in both
// families (an edge node whose link to the cloud is down); the returned
// func puts the link back.
func cutOff(t testing.TB, a *cluster.Node) func() {
	t.Helper()
	var rules [][]string // the iptables binary of the family, then the rule
	v4, v6 := kc.CloudNets()
	for cmd, nets := range map[string][]string{"iptables": v4, "ip6tables": v6} {
		for _, net := range nets {
			rules = append(rules, []string{cmd, "OUTPUT", "-d", net}, []string{cmd, "INPUT", "-s", net}, []string{cmd, "FORWARD", "-d", net}, []string{cmd, "FORWARD", "-s", net})
		}
	}
	iptables := func(op string, rule []string) error {
		args := append([]string{"-w", op, rule[1]}, rule[2:]...)
		if out, err := a.NetCommand(context.Background(), rule[0], append(args, "-j", "DROP")...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s %v: %v: %s", rule[0], args, err, out)
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
