package yurthosts

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The records ConfigMap as the sync writes it: edge nodes at the tunnel
// ClusterIP, cloud nodes at their InternalIP.
const recordsText = "10.96.0.9\tedge-1\n" +
	"10.96.0.9\tedge-node-1\n" +
	"10.96.0.9\tedge-2\n" +
	"192.168.0.2\tmaster-1\n" +
	"fd00::2\tmaster-1\n" +
	"192.168.0.3\tcloud-2\n" +
	"192.168.0.4\tcloud-2\n" +
	"192.168.0.3\tcloud-2-alias"

// ravenText is edge-tunnel-nodes as Raven's rules write it with the L7
// proxy on: every node, cloud ones too, at the proxy Service's ClusterIP.
const ravenText = "10.96.100.7\tmaster-1\n10.96.100.7\tworker-1\n10.96.100.7\tworker-2"

// ravenOffText is the same with the proxy off: each node at its own address.
const ravenOffText = "192.168.0.10\tmaster-1\n192.168.1.21\tworker-1\n203.0.113.22\tworker-2"

// tunnelAt is the tunnel for records rendered for 10.96.0.9 (as the sync
// annotates them) under a Service whose ClusterIPs are now current.
func tunnelAt(current ...string) tunnel {
	return newTunnel([]netip.Addr{netip.MustParseAddr("10.96.0.9")}, tunnelnodes.ServiceClusterIPs(tunnelService(current...)))
}

// tunnelService is the tunnel Service with clusterIPs; nil (absent) without.
func tunnelService(clusterIPs ...string) *corev1.Service {
	if len(clusterIPs) == 0 {
		return nil
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName},
		Spec:       corev1.ServiceSpec{ClusterIP: clusterIPs[0], ClusterIPs: clusterIPs},
	}
}

// annotatedCM is a records ConfigMap as the sync writes it: text rendered
// for the tunnel ClusterIPs ips ("": no annotation, as upstream writes it).
func annotatedCM(text, ips string) *corev1.ConfigMap {
	cm := recordsCM(text)
	if ips != "" {
		cm.Annotations = map[string]string{tunnelnodes.TunnelClusterIPsAnnotation: ips}
	}
	return cm
}

// newTestPlugin answers text's names from a set of 4 shards, each name in
// its own, as the sync writes them: cloud-2 (shard 1) and cloud-2-alias
// (shard 0) share an address.
func newTestPlugin(text string, tun tunnel, f fall.F) *YurtHosts {
	y := newYurtHosts()
	y.Zones = []string{"."}
	y.Fall = f
	y.Next = test.NextHandler(dns.RcodeRefused, nil) // marks "handed to the next plugin"
	entries, _ := tunnelnodes.ParseHosts(text)
	const count = 4
	groups := make([]recordGroup, count)
	for _, e := range entries {
		i := tunnelnodes.ShardOf(e.Name, count)
		groups[i].entries = append(groups[i].entries, e)
	}
	tables := make([]*table, count)
	for i, g := range groups {
		g.tun = tun
		tables[i] = newTable(g)
	}
	y.records.Store(newRecords(tables))
	return y
}

// serve runs one query and returns the rcode and the written message (nil
// when the query went to the next plugin).
func serve(t *testing.T, y *YurtHosts, tc test.Case) (int, *dns.Msg) {
	t.Helper()
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rcode, err := y.ServeDNS(context.Background(), rec, tc.Msg())
	if err != nil {
		t.Fatalf("%s %s: %v", tc.Qname, dns.TypeToString[tc.Qtype], err)
	}
	return rcode, rec.Msg
}

func TestServeDNS(t *testing.T) {
	y := newTestPlugin(recordsText, tunnelAt("10.96.0.9"), fall.Zero)
	cases := []test.Case{
		{Qname: "edge-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-1. 5 IN A 10.96.0.9")}},
		// Case-insensitive, and the answer keeps the asker's spelling (DNS 0x20).
		{Qname: "EDGE-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("EDGE-1. 5 IN A 10.96.0.9")}},
		// Exact names: a suffix or a prefix is another node.
		{Qname: "node-1.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError},
		{Qname: "x.edge-1.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError},
		{Qname: "edge-node-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-node-1. 5 IN A 10.96.0.9")}},
		// Name without the asked type: NOERROR, no answer.
		{Qname: "edge-1.", Qtype: dns.TypeAAAA},
		{Qname: "edge-1.", Qtype: dns.TypeMX},
		{Qname: "master-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("master-1. 5 IN A 192.168.0.2")}},
		{Qname: "master-1.", Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA("master-1. 5 IN AAAA fd00::2")}},
		// One name, two addresses: both, in the order written.
		{Qname: "cloud-2.", Qtype: dns.TypeA, Answer: []dns.RR{
			test.A("cloud-2. 5 IN A 192.168.0.3"), test.A("cloud-2. 5 IN A 192.168.0.4")}},
		{Qname: "3.0.168.192.in-addr.arpa.", Qtype: dns.TypePTR, Answer: []dns.RR{
			test.PTR("3.0.168.192.in-addr.arpa. 5 IN PTR cloud-2-alias."), test.PTR("3.0.168.192.in-addr.arpa. 5 IN PTR cloud-2.")}},
		{Qname: "2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", Qtype: dns.TypePTR, Answer: []dns.RR{
			test.PTR("2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. 5 IN PTR master-1.")}},
	}
	for _, tc := range cases {
		rcode, m := serve(t, y, tc)
		if m == nil {
			t.Errorf("%s %s: went to the next plugin (rcode %d)", tc.Qname, dns.TypeToString[tc.Qtype], rcode)
			continue
		}
		if !m.Authoritative {
			t.Errorf("%s: answer not authoritative", tc.Qname)
		}
		if err := test.SortAndCheck(m, tc); err != nil {
			t.Errorf("%s %s: %v", tc.Qname, dns.TypeToString[tc.Qtype], err)
		}
	}
}

// TestServeDNSNextPlugin covers every query that yurthosts hands on.
func TestServeDNSNextPlugin(t *testing.T) {
	tests := []struct {
		name  string
		y     *YurtHosts
		query test.Case
	}{
		{"tunnel ClusterIP is never answered in reverse", newTestPlugin(recordsText, tunnelAt("10.96.0.9"), fall.Zero),
			test.Case{Qname: "9.0.96.10.in-addr.arpa.", Qtype: dns.TypePTR}},
		{"unknown address in reverse", newTestPlugin(recordsText, tunnelAt("10.96.0.9"), fall.Zero),
			test.Case{Qname: "1.1.1.1.in-addr.arpa.", Qtype: dns.TypePTR}},
		{"unknown name with fallthrough", newTestPlugin(recordsText, tunnelAt("10.96.0.9"), fall.Root),
			test.Case{Qname: "kubernetes.default.svc.cluster.local.", Qtype: dns.TypeA}},
		{"unknown name inside fallthrough zones", newTestPlugin(recordsText, tunnelAt("10.96.0.9"), fall.F{Zones: []string{"cluster.local."}}),
			test.Case{Qname: "kubernetes.default.svc.cluster.local.", Qtype: dns.TypeA}},
		{"name outside the plugin's zones", func() *YurtHosts {
			y := newTestPlugin(recordsText, tunnelAt("10.96.0.9"), fall.Zero)
			y.Zones = []string{"edge.example."}
			return y
		}(), test.Case{Qname: "edge-1.", Qtype: dns.TypeA}},
		{"no_reverse", func() *YurtHosts {
			y := newTestPlugin(recordsText, tunnelAt("10.96.0.9"), fall.Zero)
			y.noReverse = true
			return y
		}(), test.Case{Qname: "2.0.168.192.in-addr.arpa.", Qtype: dns.TypePTR}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rcode, m := serve(t, tc.y, tc.query)
			if m != nil || rcode != dns.RcodeRefused {
				t.Errorf("want the next plugin to answer, got rcode %d msg %v", rcode, m)
			}
		})
	}

	// Outside the fallthrough zones an unknown name is NXDOMAIN.
	y := newTestPlugin(recordsText, tunnelAt("10.96.0.9"), fall.F{Zones: []string{"cluster.local."}})
	if rcode, m := serve(t, y, test.Case{Qname: "nope.", Qtype: dns.TypeA}); rcode != dns.RcodeNameError || m == nil || m.Rcode != dns.RcodeNameError {
		t.Errorf("want NXDOMAIN outside fallthrough zones, got rcode %d msg %v", rcode, m)
	}
}

// TestTunnelRemap: records written for an earlier tunnel ClusterIP answer the
// Service's current ClusterIPs (both families when dual-stack); with the
// Service absent, records are served as written.
func TestTunnelRemap(t *testing.T) {
	recreated := tunnelAt("10.96.5.5") // rendered for 10.96.0.9, current 10.96.5.5
	dual := tunnelAt("10.96.5.5", "fd00:10:96::5")
	absent := tunnelAt()
	tests := []struct {
		name string
		tun  tunnel
		tc   test.Case
	}{
		{"recreated service", recreated, test.Case{Qname: "edge-2.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("edge-2. 5 IN A 10.96.5.5")}}},
		{"recreated single-stack has no AAAA", recreated, test.Case{Qname: "edge-2.", Qtype: dns.TypeAAAA}},
		{"cloud node untouched", recreated, test.Case{Qname: "master-1.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("master-1. 5 IN A 192.168.0.2")}}},
		{"dual-stack A", dual, test.Case{Qname: "edge-2.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("edge-2. 5 IN A 10.96.5.5")}}},
		{"dual-stack AAAA", dual, test.Case{Qname: "edge-2.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("edge-2. 5 IN AAAA fd00:10:96::5")}}},
		{"service absent: as written", absent, test.Case{Qname: "edge-2.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("edge-2. 5 IN A 10.96.0.9")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, m := serve(t, newTestPlugin(recordsText, tc.tun, fall.Zero), tc.tc)
			if m == nil {
				t.Fatal("went to the next plugin")
			}
			if err := test.SortAndCheck(m, tc.tc); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestStatelessTunnelRemap: which entries are tunnel entries follows from the
// ConfigMap's tunnel-cluster-ips annotation and the Service as they are now
// (buildRecords of the two objects), so a replica started at any moment
// answers like every other. Tunnel addresses, annotated or current, always
// go to the next plugin in reverse.
func TestStatelessTunnelRemap(t *testing.T) {
	const (
		ptrOld = "9.0.96.10.in-addr.arpa."
		ptrNew = "5.5.96.10.in-addr.arpa."
		ptrV6  = "5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa."
	)
	next := func(qname string) test.Case {
		return test.Case{Qname: qname, Qtype: dns.TypePTR, Rcode: dns.RcodeRefused}
	}
	tests := []struct {
		name  string
		cm    *corev1.ConfigMap
		svc   *corev1.Service
		cases []test.Case
	}{
		{"annotated old ClusterIP, Service recreated", annotatedCM(recordsText, "10.96.0.9"), tunnelService("10.96.5.5"), []test.Case{
			{Qname: "edge-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-1. 5 IN A 10.96.5.5")}},
			{Qname: "edge-node-1.", Qtype: dns.TypeAAAA},
			{Qname: "master-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("master-1. 5 IN A 192.168.0.2")}},
			next(ptrOld), next(ptrNew),
		}},
		{"annotated old dual-stack ClusterIPs, recreated dual-stack", annotatedCM(recordsText, "10.96.0.9,fd00:10:96::9"), tunnelService("10.96.5.5", "fd00:10:96::5"), []test.Case{
			{Qname: "edge-2.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-2. 5 IN A 10.96.5.5")}},
			{Qname: "edge-2.", Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA("edge-2. 5 IN AAAA fd00:10:96::5")}},
			next(ptrOld), next(ptrNew), next(ptrV6),
		}},
		{"bad annotation entries ignored", annotatedCM(recordsText, " junk ,, 10.96.0.9 ,fe80::1%eth0"), tunnelService("10.96.5.5"), []test.Case{
			{Qname: "edge-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-1. 5 IN A 10.96.5.5")}},
			next(ptrOld),
		}},
		{"upstream records (no annotation) at the current ClusterIP", annotatedCM(recordsText, ""), tunnelService("10.96.0.9", "fd00:10:96::9"), []test.Case{
			{Qname: "edge-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-1. 5 IN A 10.96.0.9")}},
			{Qname: "edge-1.", Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA("edge-1. 5 IN AAAA fd00:10:96::9")}},
			next(ptrOld),
		}},
		{"upstream records (no annotation), Service recreated: as written", annotatedCM(recordsText, ""), tunnelService("10.96.5.5"), []test.Case{
			{Qname: "edge-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-1. 5 IN A 10.96.0.9")}},
		}},
		{"annotated, Service absent: as written", annotatedCM(recordsText, "10.96.0.9"), nil, []test.Case{
			{Qname: "edge-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-1. 5 IN A 10.96.0.9")}},
			next(ptrOld),
		}},
		// Raven: every name, cloud ones too, at the proxy ClusterIP.
		{"raven records by the sync, proxy Service recreated", annotatedCM(ravenText, "10.96.100.7"), tunnelService("10.96.100.8"), []test.Case{
			{Qname: "master-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("master-1. 5 IN A 10.96.100.8")}},
			{Qname: "worker-2.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("worker-2. 5 IN A 10.96.100.8")}},
			next("7.100.96.10.in-addr.arpa."), next("8.100.96.10.in-addr.arpa."),
		}},
		{"raven records by upstream (no annotation) at the current ClusterIP", annotatedCM(ravenText, ""), tunnelService("10.96.100.7", "fd00:10:96::7"), []test.Case{
			{Qname: "master-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("master-1. 5 IN A 10.96.100.7")}},
			{Qname: "worker-1.", Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA("worker-1. 5 IN AAAA fd00:10:96::7")}},
			next("7.100.96.10.in-addr.arpa."),
		}},
		// Unannotated records name no ClusterIP but the current one: after a
		// recreation they are served as written until rewritten (the sync
		// does so within its debounce), never from a remembered IP.
		{"raven records by upstream, proxy Service recreated: as written", annotatedCM(ravenText, ""), tunnelService("10.96.100.8"), []test.Case{
			{Qname: "master-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("master-1. 5 IN A 10.96.100.7")}},
			next("8.100.96.10.in-addr.arpa."),
		}},
		{"raven records with the proxy off: node addresses, answered in reverse", annotatedCM(ravenOffText, ""), tunnelService("10.96.100.7"), []test.Case{
			{Qname: "worker-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("worker-1. 5 IN A 192.168.1.21")}},
			{Qname: "21.1.168.192.in-addr.arpa.", Qtype: dns.TypePTR, Answer: []dns.RR{test.PTR("21.1.168.192.in-addr.arpa. 5 IN PTR worker-1.")}},
			next("7.100.96.10.in-addr.arpa."),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			y := newTestPlugin("", tunnel{}, fall.Zero)
			recs, _ := buildRecords(tc.cm, tunnelnodes.ConfigMapKey, tc.svc)
			y.records.Store(recs)
			for _, c := range tc.cases {
				rcode, m := serve(t, y, c)
				if c.Rcode == dns.RcodeRefused {
					if m != nil || rcode != dns.RcodeRefused {
						t.Errorf("%s %s: want the next plugin, got rcode %d msg %v", c.Qname, dns.TypeToString[c.Qtype], rcode, m)
					}
					continue
				}
				if m == nil {
					t.Errorf("%s %s: went to the next plugin", c.Qname, dns.TypeToString[c.Qtype])
					continue
				}
				if err := test.SortAndCheck(m, c); err != nil {
					t.Errorf("%s %s: %v", c.Qname, dns.TypeToString[c.Qtype], err)
				}
			}
		})
	}
}

func TestBuildRecordsDeduplicates(t *testing.T) {
	entries, _ := tunnelnodes.ParseHosts("10.0.0.1 a a\n10.0.0.1 a\n10.0.0.2 a\n10.96.0.9 e\n10.96.0.8 e")
	// Both tunnel addresses (old and current) collapse to the current one.
	tun := tunnelAt("10.96.0.8")
	r := newTable(recordGroup{entries, tun})
	if got := fmt.Sprint(r.hosts["a."].v4); got != "[10.0.0.1 10.0.0.2]" {
		t.Errorf("a. = %s", got)
	}
	if got := fmt.Sprint(r.hosts["e."].v4); got != "[10.96.0.8]" {
		t.Errorf("e. = %s", got)
	}
	if got := r.reverse["1.0.0.10.in-addr.arpa."]; len(got) != 1 {
		t.Errorf("reverse of 10.0.0.1 = %v", got)
	}
	if len(r.reverse) != 2 {
		t.Errorf("reverse has tunnel addresses: %v", r.reverse)
	}
}

func BenchmarkServeDNS(b *testing.B) {
	const n = 10000
	var text []byte
	for i := range n {
		if i%10 == 0 {
			text = fmt.Appendf(text, "192.168.%d.%d\tcloud-%d\n", i/250, i%250, i)
		} else {
			text = fmt.Appendf(text, "10.96.0.9\tedge-%d\n", i)
		}
	}
	y := newTestPlugin(string(text), tunnelAt("10.96.0.9"), fall.Root)
	msgs := make([]*dns.Msg, 64)
	for i := range msgs {
		msgs[i] = new(dns.Msg).SetQuestion(fmt.Sprintf("edge-%d.", i*97%n|1), dns.TypeA)
	}
	w := &test.ResponseWriter{}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := y.ServeDNS(ctx, w, msgs[i%len(msgs)]); err != nil {
			b.Fatal(err)
		}
	}
}
