package realcluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkBothFamilies: on the dual-stack cluster, after install, every node
// name answers A and AAAA through kube-dns's ClusterIP of each family, from
// every node: an edge name the tunnel Service's ClusterIP of that family, a
// cloud name its own InternalIP of it, and a family a name lacks (a cloud
// Node with an IPv4 address only) NODATA, never NXDOMAIN. status
// --verify-dns, run on master-1, checks both families at either server.
func checkBothFamilies(t *testing.T) {
	ctx := context.Background()
	tunnel := dualStackTunnel(t)
	const v4only = "cloud-v4-only"
	if err := cluster.CreateNodeObject(ctx, cs, v4only, "198.51.100.13", map[string]string{tunnelnodes.EdgeNodeLabel: "false"}); err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Nodes().Delete(ctx, v4only, metav1.DeleteOptions{})
	m := kc.Master()
	want := map[string][2]string{ // A, AAAA ("": NODATA)
		"worker-1": {tunnel.Spec.ClusterIPs[0], tunnel.Spec.ClusterIPs[1]},
		m.Name:     {m.IP, m.IP6},
		v4only:     {"198.51.100.13", ""},
	}
	for _, n := range kc.Nodes {
		for _, server := range []string{cluster.KubeDNSIP(), cluster.KubeDNSIP6()} {
			for name, w := range want {
				for i, qtype := range []string{"A", "AAAA"} {
					harness.Eventually(t, 10*time.Second, func() error {
						r, err := n.Dig(ctx, server, name, qtype)
						if err != nil || r.Status != "NOERROR" || strings.Join(r.Data(qtype), ",") != w[i] {
							return fmt.Errorf("%s: dig @%s %s %s = %v %s; want NOERROR %q", n.Name, server, name, qtype, err, r.Raw, w[i])
						}
						return nil
					})
				}
			}
		}
	}
	for _, server := range []string{cluster.KubeDNSIP() + ":53", "[" + cluster.KubeDNSIP6() + "]:53"} {
		out, err := m.NetCommand(ctx, syncBin, "status", "--verify-dns", server, "--kubeconfig", kc.Kubeconfig).CombinedOutput()
		if err != nil || !strings.Contains(string(out), m.IP+","+m.IP6) {
			t.Errorf("status --verify-dns %s on master-1: %v\n%s", server, err, out)
		}
	}
}

// checkTunnelFamily: worker-1 resolves to the tunnel Service's ClusterIP of
// each family, and kube-apiserver (Go's dialer) tries them in RFC 6724's
// order: a 2001:db8:: destination (precedence 40, the ::/0 row) before an
// IPv4 one (35). So kubectl logs reaches the kubelet through the IPv6
// ClusterIP, as master-1's conntrack shows. With the tunnel server's IPv6
// address refused there, the dialer moves on to the IPv4 ClusterIP at
// once, and logs work on the first try.
func checkTunnelFamily(t *testing.T) {
	ctx := context.Background()
	svc := dualStackTunnel(t)
	m := kc.Master()
	flows := func(family, dst string) int {
		out, _ := m.NetCommand(ctx, "conntrack", "-L", "-f", family, "-p", "tcp", "--orig-dst", dst, "--dport", "10250").Output()
		return strings.Count(string(out), "dport=10250 ")
	}
	// master-1's own apiserver, not the load balancer's pick: its node's
	// conntrack table is the one read.
	agent := podOn(t, "k8s-app=yurt-tunnel-agent", "worker-1")
	logs := func() time.Duration {
		started := time.Now()
		if out, err := kc.Kubectl(ctx, "--server", "https://"+m.IP+":6443", "-n", "kube-system", "logs", agent, "--tail=1"); err != nil {
			t.Errorf("kubectl logs on worker-1: %v\n%s", err, out)
		}
		return time.Since(started)
	}
	took := logs()
	v4, v6 := flows("ipv4", svc.Spec.ClusterIPs[0]), flows("ipv6", svc.Spec.ClusterIPs[1])
	t.Logf("kubectl logs on worker-1 in %s; master-1's connections to the tunnel's ClusterIPs: %d to %s, %d to %s",
		took.Round(time.Millisecond), v4, svc.Spec.ClusterIPs[0], v6, svc.Spec.ClusterIPs[1])
	if v6 == 0 {
		t.Errorf("kube-apiserver did not dial the tunnel's IPv6 ClusterIP %s", svc.Spec.ClusterIPs[1])
	}

	// The tunnel server's IPv6 endpoint refused (filter OUTPUT sees the
	// address after kube-proxy's DNAT).
	rule := []string{"OUTPUT", "-p", "tcp", "-d", m.IP6, "--dport", strconv.Itoa(tunnelnodes.DefaultHTTPSTargetPort), "-j", "REJECT", "--reject-with", "tcp-reset"}
	if out, err := m.NetCommand(ctx, "ip6tables", append([]string{"-w", "-I"}, rule...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip6tables: %v: %s", err, out)
	}
	took = logs()
	if out, err := m.NetCommand(ctx, "ip6tables", append([]string{"-w", "-D"}, rule...)...).CombinedOutput(); err != nil {
		t.Errorf("ip6tables: %v: %s", err, out)
	}
	if after := flows("ipv4", svc.Spec.ClusterIPs[0]); after <= v4 {
		t.Errorf("with the tunnel server's IPv6 address refused, kube-apiserver made no connection to the tunnel's IPv4 ClusterIP %s", svc.Spec.ClusterIPs[0])
	}
	t.Logf("with the tunnel server's IPv6 address refused: kubectl logs on worker-1 in %s, through %s", took.Round(time.Millisecond), svc.Spec.ClusterIPs[0])
}

// dualStackTunnel is the tunnel Service, which on the dual-stack cluster
// must have a ClusterIP of each family.
func dualStackTunnel(t *testing.T) *corev1.Service {
	t.Helper()
	svc, err := cs.CoreV1().Services("kube-system").Get(context.Background(), tunnelnodes.ServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.ClusterIPs) != 2 {
		t.Fatalf("the tunnel Service's ClusterIPs are %v: want one of each family", svc.Spec.ClusterIPs)
	}
	return svc
}
