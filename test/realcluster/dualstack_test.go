package realcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

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
	tunnel, err := cs.CoreV1().Services("kube-system").Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tunnel.Spec.ClusterIPs) != 2 {
		t.Fatalf("the tunnel Service's ClusterIPs are %v: want one of each family", tunnel.Spec.ClusterIPs)
	}
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
