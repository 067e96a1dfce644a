package realcluster

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/cluster"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkInstallWithNotReadyNode: an edge node cut off from the cloud
// (its kubelet stopped: NotReady) does not block install, which names it;
// the stock CoreDNS pods never see a Corefile they cannot parse. An install
// and a revert on six nodes (about 3 minutes): in make bench; make test's
// e2e TestInstallRevert installs with a NotReady node against envtest.
func BenchmarkInstallWithNotReadyNode(b *testing.B) {
	for range b.N {
		installWithNotReadyNode(b)
	}
}

func installWithNotReadyNode(t testing.TB) {
	worker := kc.Node("worker-1")
	worker.StopKubelet()
	defer func() {
		worker.StartKubelet()
		waitNodeReady(t, "worker-1", true, 2*time.Minute)
	}()
	waitNodeReady(t, "worker-1", false, 2*time.Minute)

	stockCorefile, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stockLogs := followStockCoreDNS(t)
	probe := startDNSProbe([]*cluster.Node{kc.Master()})
	out, err := runSync(t, "install", "--skip", "control-plane")
	probe.finish(t, "install with worker-1 NotReady")
	if err != nil {
		t.Fatalf("install with a NotReady node: %v", err)
	}
	if line := stepLine(out, "coredns-daemonset"); !strings.Contains(line, "worker-1") {
		t.Errorf("install does not name the NotReady node: %q", line)
	}
	for pod, logs := range stockLogs() {
		for _, bad := range []string{"Unknown directive", "Corefile", "plugin/errors"} {
			if strings.Contains(logs, bad) {
				t.Errorf("stock CoreDNS pod %s logged %q:\n%s", pod, bad, logs)
			}
		}
	}
	if now, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "coredns", metav1.GetOptions{}); err != nil || now.ResourceVersion != stockCorefile.ResourceVersion {
		t.Errorf("the stock coredns ConfigMap was written during install (%v)", err)
	}
	if _, err := runSync(t, "revert"); err != nil {
		t.Fatalf("revert: %v", err)
	}
}

// BenchmarkInstallInterrupted: install killed right after the DaemonSet
// step, run again and killed right after the control-plane step, then run
// again, completes; DNS answers throughout, and revert afterwards is exact.
// Three installs and a revert across three control-plane nodes (about 6
// minutes): a repeated cycle, in make bench; make test's e2e
// TestInstallInterrupted kills install at every step against envtest.
func BenchmarkInstallInterrupted(b *testing.B) {
	for range b.N {
		before := kubeadmState(b)
		probe := startDNSProbe(kc.Nodes)
		killInstallAfter(b, "coredns-daemonset")
		killInstallAfter(b, "control-plane")
		_, err := runSync(b, "install", "--control-plane-jobs")
		probe.finish(b, "install killed after coredns-daemonset, again after control-plane, then run to the end")
		if err != nil {
			b.Fatalf("install after the interrupted ones: %v", err)
		}
		revertExactly(b, before)
		b.ReportMetric(float64(probe.total), "queries")
		b.ReportMetric(float64(len(probe.failures)), "failed")
	}
}

// killInstallAfter runs install --control-plane-jobs and SIGKILLs it the
// moment it reports step done.
func killInstallAfter(t testing.TB, step string) {
	t.Helper()
	cmd := exec.Command(syncBin, "install", "--control-plane-jobs", "--kubeconfig", kc.Kubeconfig)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		// Stamped like runSync's lines, to set beside the DNS probe's.
		seen = append(seen, time.Now().Format("15:04:05.000")+" "+sc.Text())
		if strings.HasPrefix(sc.Text(), "["+step+"] ") {
			cmd.Process.Kill()
			break
		}
	}
	err = cmd.Wait()
	t.Logf("install killed after [%s] (%v):\n%s", step, err, strings.Join(seen, "\n"))
	if err == nil {
		t.Fatalf("install finished before it could be killed after [%s]", step)
	}
}

func stepLine(out, step string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "["+step+"] ") {
			return line
		}
	}
	return ""
}

func waitNodeReady(t testing.TB, name string, ready bool, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && (c.Status == corev1.ConditionTrue) == ready {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not Ready=%v after %s", name, ready, timeout)
		}
		time.Sleep(time.Second)
	}
}

// followStockCoreDNS reads, every second until stopped, the logs of the
// stock CoreDNS Deployment's pods from their nodes' log files (any node:
// the apiserver cannot reach the sites' kubelets before install), keeping
// the last read of a pod whose files went with it; the returned function
// stops and returns what each pod logged.
func followStockCoreDNS(t testing.TB) func() map[string]string {
	t.Helper()
	pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	logs := map[string]string{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range pods.Items {
		n := kc.Node(p.Spec.NodeName)
		if len(p.OwnerReferences) == 0 || p.OwnerReferences[0].Kind != "ReplicaSet" || !cluster.PodReady(&p) || n == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if out, err := n.PodLogs("kube-system", p.Name); err == nil {
					mu.Lock()
					logs[p.Name] = out
					mu.Unlock()
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
	return func() map[string]string {
		close(stop)
		wg.Wait()
		if len(logs) == 0 {
			t.Error("no stock CoreDNS pod's logs read")
		}
		return logs
	}
}
