package verify

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// serveDNS answers on 127.0.0.1 from records: per name, "A 10.96.0.9",
// "AAAA fd00::9" or "AAAA NXDOMAIN"; another type or a name's missing type
// NODATA; a name not there NXDOMAIN. It returns the server's address.
func serveDNS(t *testing.T, records map[string][]string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg).SetReply(q)
		m.Authoritative = true // as yurthosts answers
		name, qtype := q.Question[0].Name, dns.TypeToString[q.Question[0].Qtype]
		rrs, ok := records[name]
		if !ok || slices.Contains(rrs, qtype+" NXDOMAIN") {
			m.Rcode = dns.RcodeNameError
		}
		for _, rr := range rrs {
			if typ, data, _ := strings.Cut(rr, " "); typ == qtype && m.Rcode == dns.RcodeSuccess {
				a, _ := dns.NewRR(name + " 5 IN " + typ + " " + data)
				m.Answer = append(m.Answer, a)
			}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// testNode is a Node with these InternalIPs, an edge node if edge.
func testNode(name string, edge bool, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if edge {
		n.Labels["openyurt.io/is-edge-worker"] = "true"
	}
	return n
}

func tunnelService(ips ...string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName},
		Spec: corev1.ServiceSpec{ClusterIP: ips[0], ClusterIPs: ips}}
}

var edgeSelector = labels.SelectorFromSet(labels.Set{"openyurt.io/is-edge-worker": "true"})

// The check a Job runs, through Go's own resolver (the one the Job uses,
// here pointed at a test DNS server): right, wrong and missing answers. A
// dual-stack name answered in one family only is right (a dialer takes any
// of its addresses, and the node's hosts file names it so); an address it
// should not have is wrong.
func TestVerifyDNSWithResolver(t *testing.T) {
	server := serveDNS(t, map[string][]string{"worker-1.": {"A 10.96.0.9"}, "master-1.": {"A 192.168.0.99"},
		"cloud-dual.": {"A 192.168.0.30"}, "cloud-wrong6.": {"A 192.168.0.31", "AAAA 2001:db8::99"}})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", server)
	}}
	c := fake.NewClientBuilder().WithObjects(tunnelService("10.96.0.9"), testNode("master-1", false, "192.168.0.10"),
		testNode("worker-1", true, "192.168.0.21"), testNode("worker-2", true, "192.168.0.22"),
		testNode("cloud-dual", false, "192.168.0.30", "2001:db8::30"), testNode("cloud-wrong6", false, "192.168.0.31", "2001:db8::31")).Build()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := VerifyDNSWithResolver(ctx, c, yurtTunnel(t), r, edgeSelector, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"worker-1                       edge  10.96.0.9          expected 10.96.0.9          OK",
		"master-1                       cloud 192.168.0.99       expected 192.168.0.10       MISMATCH",
		"worker-2                       edge  -                  expected 10.96.0.9          FAIL (lookup worker-2",
		"cloud-dual                     cloud 192.168.0.30       expected 192.168.0.30,2001:db8::30 OK",
		"cloud-wrong6                   cloud 192.168.0.31,2001:db8::99 expected 192.168.0.31,2001:db8::31 MISMATCH",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if n != 3 {
		t.Errorf("%d wrong, want 3:\n%s", n, out.String())
	}
}

// status --verify-dns asks A and AAAA for every name: a dual-stack cloud
// node's own address of each family, an edge node's the tunnel Service's
// ClusterIP of each family; a family the name lacks must be NODATA, and
// NXDOMAIN there fails (a resolver would give up on the name).
func TestVerifyDNSBothFamilies(t *testing.T) {
	server := serveDNS(t, map[string][]string{
		"master-1.":  {"A 192.168.0.10", "AAAA 2001:db8::10"},
		"cloud-v4.":  {"A 192.168.0.11"},
		"cloud-nx.":  {"A 192.168.0.12", "AAAA NXDOMAIN"},
		"cloud-one.": {"A 192.168.0.13"},
		"worker-1.":  {"A 10.96.0.9", "AAAA fd00:10:96::9"},
		"worker-2.":  {"A 10.96.0.9"},
	})
	c := fake.NewClientBuilder().WithObjects(tunnelService("10.96.0.9", "fd00:10:96::9"),
		testNode("master-1", false, "2001:db8::10", "192.168.0.10"), testNode("cloud-v4", false, "192.168.0.11"),
		testNode("cloud-nx", false, "192.168.0.12"), testNode("cloud-one", false, "192.168.0.13", "2001:db8::13"),
		testNode("worker-1", true, "192.168.0.21"), testNode("worker-2", true, "192.168.0.22")).Build()
	var out strings.Builder
	n, err := VerifyDNS(context.Background(), c, yurtTunnel(t), server, edgeSelector, &out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"master-1                       cloud 192.168.0.10,2001:db8::10 expected 192.168.0.10,2001:db8::10 OK",
		"cloud-v4                       cloud 192.168.0.11       expected 192.168.0.11       OK",
		"cloud-nx                       cloud 192.168.0.12       expected 192.168.0.12       FAIL (AAAA: NXDOMAIN)",
		"cloud-one                      cloud 192.168.0.13       expected 192.168.0.13,2001:db8::13 MISMATCH",
		"worker-1                       edge  10.96.0.9,fd00:10:96::9 expected 10.96.0.9,fd00:10:96::9 OK",
		"worker-2                       edge  10.96.0.9          expected 10.96.0.9,fd00:10:96::9 MISMATCH",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if n != 3 {
		t.Errorf("%d wrong, want 3:\n%s", n, out.String())
	}
}

func TestDNSServer(t *testing.T) {
	for flag, want := range map[string]string{
		"10.96.0.10:53":      "10.96.0.10:53",
		"[2001:db8::a]:53":   "[2001:db8::a]:53",
		"[2001:DB8:0::a]:53": "[2001:db8::a]:53",
		"2001:db8::a:53":     "", // brackets are required
		"10.96.0.10":         "",
		"kube-dns:53":        "",
	} {
		got, err := ParseDNSServer(flag)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("%q: %q %v, want %q", flag, got, err, want)
		}
	}
}

func TestParseVerifyLog(t *testing.T) {
	report, n, err := parseVerifyLog("a OK\nb MISMATCH\n" + VerifySummary(1) + "\n")
	if err != nil || n != 1 || report != "a OK\nb MISMATCH\n" {
		t.Errorf("got %q %d %v", report, n, err)
	}
	if _, _, err := parseVerifyLog("a OK\npanic: boom\n"); err == nil || !strings.Contains(err.Error(), "panic: boom") {
		t.Errorf("an unfinished check: %v", err)
	}
}

func FuzzParseVerifyLog(f *testing.F) {
	for _, s := range []string{VerifySummary(0), "x\n" + VerifySummary(3) + "\n", "", "\n", verifySummaryPrefix + "-1", verifySummaryPrefix + "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, log string) {
		report, n, err := parseVerifyLog(log)
		if err != nil {
			return
		}
		if n < 0 || !strings.HasPrefix(log, report) || strings.Contains(report, verifySummaryPrefix+"-") {
			t.Errorf("%q: report %q, %d", log, report, n)
		}
	})
}

// The Job runs where and as kube-apiserver resolves: on the node, host
// network, kube-apiserver's DNS settings, with the check's own
// ServiceAccount, comparing with the profile's rules.
func TestVerifyJob(t *testing.T) {
	ravenDNS := &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.53"}, Searches: []string{"cluster.local"}}
	for _, tc := range []struct {
		profile   string
		policy    corev1.DNSPolicy
		dnsConfig *corev1.PodDNSConfig
	}{
		{layout.YurtTunnel, corev1.DNSClusterFirstWithHostNet, nil},
		{layout.Raven, corev1.DNSNone, ravenDNS}, // Raven's L7 docs: dnsPolicy None, raven-proxy-dns
	} {
		j := verifyJob("master-1", "docker.io/yurtdns/tunnel-nodes-sync:v1", "openyurt.io/is-edge-worker=true", tc.profile, tc.policy, tc.dnsConfig, time.Minute)
		s := j.Spec.Template.Spec
		term := s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0]
		if !s.HostNetwork || s.DNSPolicy != tc.policy || s.DNSConfig != tc.dnsConfig || s.ServiceAccountName != verifyDNSName ||
			term.Key != "metadata.name" || term.Values[0] != "master-1" || s.RestartPolicy != corev1.RestartPolicyNever ||
			*j.Spec.BackoffLimit != 0 || *j.Spec.ActiveDeadlineSeconds != 60 {
			t.Errorf("%s: job spec: %+v", tc.profile, j.Spec)
		}
		c := s.Containers[0]
		if c.Image != "docker.io/yurtdns/tunnel-nodes-sync:v1" ||
			strings.Join(c.Args, " ") != VerifyDNSCommand+" --edge-node-selector openyurt.io/is-edge-worker=true --profile "+tc.profile ||
			*s.SecurityContext.RunAsNonRoot != true || *c.SecurityContext.ReadOnlyRootFilesystem != true {
			t.Errorf("%s: container: %+v", tc.profile, c)
		}
	}
	if verifyJob("master-1", "i", "", layout.YurtTunnel, "", nil, time.Minute).Name == verifyJob("master-2", "i", "", layout.YurtTunnel, "", nil, time.Minute).Name {
		t.Error("one Job name for two nodes")
	}
}

// The Job takes kube-apiserver's DNS settings from its mirror pod.
func TestAPIServerDNS(t *testing.T) {
	ravenDNS := &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.53"}}
	apiserver := func(node string, policy corev1.DNSPolicy, cfg *corev1.PodDNSConfig) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-" + node, Namespace: tunnelnodes.Namespace},
			Spec: corev1.PodSpec{HostNetwork: true, DNSPolicy: policy, DNSConfig: cfg}}
	}
	env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(apiserver("raven-1", corev1.DNSNone, ravenDNS),
		apiserver("tunnel-1", corev1.DNSClusterFirstWithHostNet, nil), apiserver("kubeadm-1", "", nil)).Build()}
	for node, want := range map[string]corev1.DNSPolicy{
		"raven-1": corev1.DNSNone, "tunnel-1": corev1.DNSClusterFirstWithHostNet,
		"kubeadm-1": corev1.DNSClusterFirst, // unset: the default, the node's resolv.conf for a hostNetwork pod
		"no-pod":    corev1.DNSClusterFirstWithHostNet,
	} {
		policy, cfg, err := apiserverDNS(context.Background(), env, node)
		if err != nil || policy != want || (node == "raven-1") != (cfg != nil) {
			t.Errorf("%s: %s %+v %v, want %s", node, policy, cfg, err, want)
		}
	}
}

// Under Raven the Jobs may read the proxy Service and raven-cfg, by name,
// and no longer the yurt-tunnel Service.
func TestVerifyRBACFollowsProfile(t *testing.T) {
	for profile, want := range map[string]string{
		layout.YurtTunnel: "services/" + tunnelnodes.ServiceName,
		layout.Raven:      "services/" + tunnelnodes.RavenServiceName + " configmaps/" + tunnelnodes.RavenGlobalConfigName,
	} {
		p, err := layout.Named(profile)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range verifyRBAC(p) {
			if r, ok := o.(*rbacv1.Role); ok {
				for _, rule := range r.Rules {
					got = append(got, rule.Resources[0]+"/"+strings.Join(rule.ResourceNames, ","))
				}
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: the Role grants %v, want %s", profile, got, want)
		}
	}
}

func yurtTunnel(t *testing.T) layout.Layout {
	t.Helper()
	l, err := layout.Named(layout.YurtTunnel)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
