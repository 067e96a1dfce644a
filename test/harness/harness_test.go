package harness

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestControlPlane proves the harness end to end: a real apiserver answers,
// objects round-trip, and the apiserver allocates ClusterIPs (single and
// dual stack) from the harness's service ranges.
func TestControlPlane(t *testing.T) {
	cp := Start(t, Options{DualStack: true})
	ctx := context.Background()

	version, err := cp.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	t.Logf("kube-apiserver %s", version.GitVersion)

	cp.CreateNode(t, Node{Name: "worker-1", InternalIP: "192.168.0.11", Edge: true})
	node, err := cp.Client.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels["openyurt.io/is-edge-worker"] != "true" || node.Status.Addresses[0].Address != "192.168.0.11" {
		t.Errorf("node read back wrong: labels %v addresses %v", node.Labels, node.Status.Addresses)
	}

	svc := cp.CreateService(t, TunnelService())
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !netip.MustParsePrefix(ServiceCIDRv4).Contains(ip) {
		t.Fatalf("service ClusterIP %q not allocated from %s", svc.Spec.ClusterIP, ServiceCIDRv4)
	}
	cp.DeleteService(t, svc.Namespace, svc.Name)

	dual := cp.CreateService(t, TunnelService("10.96.7.7", "fd00:10:96::7"))
	if len(dual.Spec.ClusterIPs) != 2 || dual.Spec.ClusterIPs[1] != "fd00:10:96::7" {
		t.Errorf("dual-stack ClusterIPs = %v", dual.Spec.ClusterIPs)
	}

	cp.ApplyConfigMap(t, ServerConfig(map[string]string{"https-proxy-ports": "9100"}))
	cm, err := cp.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "yurt-tunnel-server-cfg", metav1.GetOptions{})
	if err != nil || cm.Data["https-proxy-ports"] != "9100" {
		t.Fatalf("configmap read back: %v %v", cm, err)
	}
}

func TestParseDig(t *testing.T) {
	out := `;; Got answer:
;; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 4242
;; flags: qr aa rd; QUERY: 1, ANSWER: 2, AUTHORITY: 0, ADDITIONAL: 1

;; ANSWER SECTION:
worker-1.		5	IN	A	10.96.0.9
worker-1.		5	IN	A	10.96.0.8
`
	r, err := parseDig(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "NOERROR" || !r.HasFlag("aa") || r.HasFlag("tc") {
		t.Errorf("status %q flags %v", r.Status, r.Flags)
	}
	if got := r.Data("A"); len(got) != 2 || got[0] != "10.96.0.8" || r.Answers[0].TTL != 5 {
		t.Errorf("answers %v", r.Answers)
	}
	if _, err := parseDig("connection timed out; no servers could be reached"); err == nil {
		t.Error("want an error for output without a header")
	}
}

// TestDigWithServer: the server's address and port reach dig as "@IP -p
// PORT" for both families, a bare address meaning port 53.
func TestDigWithServer(t *testing.T) {
	for _, c := range []struct {
		server, want string // want: dig's first three arguments; "" = an error
	}{
		{"10.96.0.10", "@10.96.0.10 -p 53"},
		{"10.96.0.10:5353", "@10.96.0.10 -p 5353"},
		{"2001:db8::a", "@2001:db8::a -p 53"},
		{"[2001:db8::a]:53", "@2001:db8::a -p 53"},
		{"[::1]:5353", "@::1 -p 5353"},
		{"2001:db8::a:53", "@2001:db8::a:53 -p 53"}, // unbracketed: all of it is the address
		{"[2001:db8::a]", ""},
		{"10.96.0.10:", ""},
		{"kube-dns:53", ""},
		{"", ""},
	} {
		var got string
		_, err := DigWith(func(args ...string) ([]byte, error) {
			got = strings.Join(args[:3], " ")
			return []byte(";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 1\n"), nil
		}, c.server, "worker-1", "AAAA")
		switch {
		case c.want == "" && err == nil:
			t.Errorf("%q: dig ran with %q, want an error", c.server, got)
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("%q: dig args %q, err %v; want %q", c.server, got, err, c.want)
		}
	}
}

// TestAPIServerRestart: after a SIGKILL and a restart the apiserver serves
// the same data (etcd kept running) on the same port to the same
// credentials, and the audit log records who wrote what.
func TestAPIServerRestart(t *testing.T) {
	cp := Start(t, Options{AuditLog: true})
	ctx := context.Background()
	userKubeconfig := cp.KubeconfigFor(t, "someone", "system:masters")
	cp.CreateNode(t, Node{Name: "worker-1", InternalIP: "192.168.0.11"})

	cp.KillAPIServer(t)
	if _, err := cp.Client.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{}); err == nil {
		t.Fatal("apiserver still answers after KillAPIServer")
	}
	cp.StartAPIServer(t)

	if _, err := cp.Client.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("node lost across the restart: %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", userKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("a kubeconfig from before the restart no longer works: %v", err)
	}
	creates := cp.AuditEvents(t, func(e AuditEvent) bool {
		return e.Verb == "create" && e.ObjectRef.Resource == "nodes" && e.ObjectRef.Name == "worker-1"
	})
	if len(creates) != 1 || creates[0].User.Username != "harness-admin" {
		t.Fatalf("audit log: node creates = %+v, want one by harness-admin", creates)
	}
}
