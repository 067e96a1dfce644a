// Command demo is `make demo`: a local control plane seeded like a small
// kubeadm + OpenYurt cluster, `tunnel-nodes-sync install` and `run`,
// coredns-yurt on a loopback port, and dig showing node names resolve and
// follow changes. It runs until Ctrl-C and then stops everything it started.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const corefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    health {{.HealthAddr}}
    prometheus {{.MetricsAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
    }
}
`

func main() {
	d := &demo{}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-stop
		fmt.Println("\nStopping everything...")
		d.cleanup()
		os.Exit(0)
	}()
	d.run()
	fmt.Println("\nRunning. Press Ctrl-C to stop everything.")
	select {}
}

func (d *demo) run() {
	root, err := harness.RepoRoot()
	if err != nil {
		d.Fatal(err)
	}
	step("Starting a local control plane (kube-apiserver + etcd from bin/k8s)")
	cp := harness.Start(d, harness.Options{})

	step("Seeding a kubeadm-shaped cluster: cloud node master-1, edge nodes worker-1..3, the tunnel Service, kubeadm's CoreDNS and kube-proxy")
	cp.CreateNode(d, harness.Node{Name: "master-1", InternalIP: "192.168.0.10"})
	for i := 1; i <= 3; i++ {
		cp.CreateNode(d, harness.Node{Name: fmt.Sprintf("worker-%d", i), InternalIP: fmt.Sprintf("192.168.0.2%d", i), Edge: true})
	}
	svc := cp.CreateService(d, harness.TunnelService("10.96.0.9"))
	cp.ApplyConfigMap(d, harness.ServerConfig(map[string]string{tunnelnodes.HTTPSProxyPortsKey: ""}))
	fixtures := filepath.Join(root, "test", "testdata", "kubeadm")
	cp.CreateFromFile(d, filepath.Join(fixtures, "coredns.yaml"))
	cp.CreateFromFile(d, filepath.Join(fixtures, "kube-proxy.yaml"))
	work := d.TempDir()
	manifests := filepath.Join(work, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		d.Fatal(err)
	}
	for _, f := range []string{"kube-apiserver.yaml", "kube-controller-manager.yaml"} {
		data, err := os.ReadFile(filepath.Join(fixtures, f))
		if err != nil {
			d.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(manifests, f), data, 0o600); err != nil {
			d.Fatal(err)
		}
	}

	sync := harness.Binary(d, "tunnel-nodes-sync")
	step("tunnel-nodes-sync install (envtest runs no controllers: the demo reports the CoreDNS DaemonSet available, as its controller would)")
	stopControllers := cp.PlayRolloutControllers(tunnelnodes.Namespace)
	install := harness.StartProcess(d, sync, "install", "--kubeconfig", cp.Kubeconfig, "--manifests-dir", manifests,
		"--backup-dir", filepath.Join(work, "yurtdns-backup"), "--coredns-image", "coredns-yurt:demo", "--timeout", "60s")
	if err := install.Wait(d, 2*time.Minute); err != nil {
		d.Fatalf("install: %v\n%s", err, install.Output())
	}
	stopControllers()
	fmt.Print(indent(install.Output()))

	step("tunnel-nodes-sync run, and coredns-yurt with yurthosts on a loopback port")
	s := harness.StartSync(d, cp.Kubeconfig, "--leader-elect=false")
	dns := harness.StartCoreDNS(d, cp.Kubeconfig, corefile)
	host, port, _ := strings.Cut(dns.DNSAddr, ":")
	digCmd := func(name string) []string { return []string{"dig", "@" + host, "-p", port, "+short", name} }

	for _, name := range []string{"worker-1", "master-1"} {
		showDig(d, digCmd(name), waitFor(dns.DNSAddr, name))
	}

	step("Adding edge node worker-4")
	start := time.Now()
	cp.CreateNode(d, harness.Node{Name: "worker-4", InternalIP: "192.168.0.24", Edge: true})
	answer := waitFor(dns.DNSAddr, "worker-4")
	fmt.Printf("  node created → answered in %s\n", time.Since(start).Round(time.Millisecond))
	showDig(d, digCmd("worker-4"), answer)

	step("Adding port 9100 (node-exporter) to https-proxy-ports")
	cp.ApplyConfigMap(d, harness.ServerConfig(map[string]string{tunnelnodes.HTTPSProxyPortsKey: "9100"}))
	ports := waitForPort(d, cp, "dnat-9100")
	fmt.Printf("  Service %s/%s ports: %s\n", svc.Namespace, svc.Name, ports)

	step("Try it yourself while it runs")
	fmt.Printf("  %s\n", strings.Join(digCmd("worker-2"), " "))
	fmt.Printf("  %s status --kubeconfig %s --manifests-dir %s --verify-dns %s\n", sync, cp.Kubeconfig, manifests, dns.DNSAddr)
	fmt.Printf("  curl -s %s | grep yurthosts\n", dns.MetricsURL)
	fmt.Printf("  curl -s %s | grep tunnel_nodes_sync_records\n", s.MetricsURL)
	fmt.Printf("  KUBECONFIG=%s  (admin kubeconfig of the local control plane)\n", cp.Kubeconfig)
}

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

// showDig runs the real dig and prints the command and its answer.
func showDig(d *demo, cmd []string, want string) {
	out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
	if err != nil {
		d.Fatalf("%s: %v\n%s", strings.Join(cmd, " "), err, out)
	}
	fmt.Printf("  $ %s\n  %s", strings.Join(cmd, " "), out)
	if strings.TrimSpace(string(out)) != want {
		d.Fatalf("dig answered %q, want %q", out, want)
	}
}

// waitFor polls until name answers an A record and returns it.
func waitFor(server, name string) string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := harness.DigErr(server, name, "A")
		if err == nil && len(r.Data("A")) > 0 {
			return r.Data("A")[0]
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "%s did not resolve: %v\n", name, err)
			return ""
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitForPort(d *demo, cp *harness.ControlPlane, name string) string {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		svc, err := cp.Client.CoreV1().Services(tunnelnodes.Namespace).Get(context.Background(), tunnelnodes.ServiceName, metav1.GetOptions{})
		if err != nil {
			continue
		}
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%s %d→%s", p.Name, p.Port, p.TargetPort.String()))
		}
		if slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == name }) {
			return strings.Join(ports, ", ")
		}
	}
	d.Fatalf("the tunnel Service has no %s port", name)
	return ""
}
