// Command demo is `make demo`: the real kubeadm cluster of test/cluster
// (three control-plane nodes behind haproxy; edge node worker-1, and
// edge-a1 and edge-b1 in two NAT'd sites with one address), `tunnel-nodes-sync
// install --control-plane-jobs` run against it as a user would, and dig
// showing node names resolve — from master-1's network namespace with the
// apiserver's own resolv.conf — and follow changes. It runs until Ctrl-C and
// then tears the cluster down.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	root, err := harness.RepoRoot()
	if err != nil {
		fail(err)
	}
	bin := filepath.Join(root, "bin")
	step("Starting the kubeadm cluster (master-1..3 behind haproxy; edge nodes worker-1, and edge-a1 and edge-b1 behind two NAT routers, both 203.0.113.10), each node in its own network namespace")
	started := time.Now()
	c, err := cluster.Start(ctx, cluster.Config{
		Dir: filepath.Join(bin, "cluster"), Bin: filepath.Join(bin, "k8s"), Log: os.Stdout,
		Images: []string{filepath.Join(bin, "coredns-yurt.oci.tar"), filepath.Join(bin, "tunnel-nodes-sync.oci.tar")},
	})
	if err != nil {
		fail(err)
	}
	stop := func() {
		fmt.Println("\nTearing the cluster down...")
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("Torn down: every process stopped by PID; the namespaces, cgroups and kernel settings put back.")
	}
	if err := show(ctx, c, filepath.Join(bin, "tunnel-nodes-sync"), started); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
	fmt.Println("\nRunning. Press Ctrl-C to tear everything down.")
	<-ctx.Done()
	stop()
}

func show(ctx context.Context, c *cluster.Cluster, syncBin string, started time.Time) error {
	fmt.Printf("  up in %s\n", time.Since(started).Round(100*time.Millisecond))
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	step("OpenYurt v1.7.0: yurt-manager and yurt-tunnel-server on master-1; on edge node worker-1 yurthub in front of the kubelet, and yurt-tunnel-agent")
	svc, err := cs.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("  the tunnel Service %s/%s: ClusterIP %s\n", svc.Namespace, svc.Name, svc.Spec.ClusterIP)

	step("tunnel-nodes-sync install --control-plane-jobs  (make image's images, imported with ctr -n k8s.io images import --all-platforms)")
	install := exec.CommandContext(ctx, syncBin, "install", "--control-plane-jobs", "--kubeconfig", c.Kubeconfig)
	install.Stdout, install.Stderr = indented{}, indented{}
	start := time.Now()
	if err := install.Run(); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	fmt.Printf("  install took %s\n", time.Since(start).Round(100*time.Millisecond))

	step("kubectl get pods -A -o wide")
	out, err := c.Kubectl(ctx, "get", "pods", "-A", "-o", "wide")
	fmt.Print(indent(out))
	if err != nil {
		return err
	}

	step("Node names from the apiserver's own view (master-1's network, the resolv.conf the kubelet gave kube-apiserver)")
	r, err := c.Master().ResolverOf("kube-apiserver")
	if err != nil {
		return err
	}
	fmt.Printf("  kube-apiserver's resolv.conf: nameserver %s, search %s\n", strings.Join(r.Nameservers, " "), strings.Join(r.Search, " "))
	if _, err := resolve(ctx, r, "worker-1", svc.Spec.ClusterIP, time.Minute); err != nil {
		return err
	}
	if _, err := resolve(ctx, r, "master-1", c.Master().IP, 10*time.Second); err != nil {
		return err
	}

	step("kubectl logs of a pod on edge node worker-1: the apiserver dials worker-1:10250 by name → coredns-yurt → the tunnel Service → yurt-tunnel-server → yurt-tunnel-agent on worker-1 → its kubelet")
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-proxy", FieldSelector: "spec.nodeName=worker-1"})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Errorf("no kube-proxy pod on worker-1: %v", err)
	}
	if err := showLogs(ctx, c, "-n", "kube-system", "logs", pods.Items[0].Name, "--tail=3"); err != nil {
		return err
	}

	master2 := "https://" + c.Node("master-2").IP + ":6443"
	step("The same through master-2's own apiserver, which runs no tunnel server, to edge-a1 and edge-b1: one address, each answered by its own node")
	for _, n := range c.SiteNodes() {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=yurt-tunnel-agent", FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil || len(pods.Items) == 0 {
			return fmt.Errorf("no yurt-tunnel-agent pod on %s: %v", n.Name, err)
		}
		if err := showLogs(ctx, c, "--server", master2, "-n", "kube-system", "logs", pods.Items[0].Name, "--tail=1"); err != nil {
			return err
		}
	}

	step("Adding edge node worker-2")
	took, err := addNode(ctx, cs, r, svc.Spec.ClusterIP)
	if err != nil {
		return err
	}
	fmt.Printf("  node created → answered in %s\n", took.Round(time.Millisecond))

	step("Try it yourself while it runs")
	m := c.Master()
	fmt.Printf("  %s --kubeconfig %s get pods -A -o wide\n", filepath.Join(filepath.Dir(syncBin), "k8s", "kubectl"), c.Kubeconfig)
	fmt.Printf("  ip netns exec %s dig @%s worker-1 +short\n", m.Netns(), cluster.KubeDNSIP())
	fmt.Printf("  %s status --kubeconfig %s --verify-dns %s:53   (from master-1: ip netns exec %s ...)\n", syncBin, c.Kubeconfig, cluster.KubeDNSIP(), m.Netns())
	fmt.Printf("  %s revert --kubeconfig %s\n", syncBin, c.Kubeconfig)
	fmt.Printf("  logs: %s/nodes/*/*.log\n", c.Dir())
	return nil
}

// resolve polls until r answers name with want, printing the dig that did.
func resolve(ctx context.Context, r *cluster.Resolver, name, want string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		addrs, q, err := r.LookupA(ctx, name)
		if err == nil && len(addrs) == 1 && addrs[0] == want {
			fmt.Printf("  $ dig @%s %s +short\n  %s\n", r.Nameservers[0], q, addrs[0])
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return 0, fmt.Errorf("%s answered %v (%v), want %s", name, addrs, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func addNode(ctx context.Context, cs kubernetes.Interface, r *cluster.Resolver, tunnelIP string) (time.Duration, error) {
	if err := cluster.CreateNodeObject(ctx, cs, "worker-2", "198.51.100.12", map[string]string{tunnelnodes.EdgeNodeLabel: "true"}); err != nil {
		return 0, err
	}
	return resolve(ctx, r, "worker-2", tunnelIP, 10*time.Second)
}

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }

// showLogs runs kubectl logs as a user would and prints it, asking again
// for up to 5 minutes: yurt-tunnel-server exits when install restarts
// kube-apiserver, and the kubelet brings it back after its crash-loop
// back-off.
func showLogs(ctx context.Context, c *cluster.Cluster, args ...string) error {
	fmt.Printf("  $ kubectl %s\n", strings.Join(args, " "))
	var out string
	var err error
	for start := time.Now(); ; time.Sleep(2 * time.Second) {
		out, err = c.Kubectl(ctx, args...)
		if err == nil || time.Since(start) > 5*time.Minute {
			break
		}
	}
	fmt.Print(indent(out))
	return err
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

type indented struct{}

func (indented) Write(p []byte) (int, error) {
	fmt.Print(indent(string(p)))
	return len(p), nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "demo:", err)
	os.Exit(1)
}
