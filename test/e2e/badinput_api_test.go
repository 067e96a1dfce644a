package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Bad API content: what the apiserver lets into the records ConfigMap, the
// tunnel Service and Node addresses, and what coredns-yurt and
// tunnel-nodes-sync (the real binaries) make of it.

const badParseErrors = `coredns_yurthosts_parse_errors_total{configmap="kube-system/yurt-tunnel-nodes"}`
const badEntries = `coredns_yurthosts_entries{configmap="kube-system/yurt-tunnel-nodes"}`

// badPatience is how long these tests wait for an answer: generous, they
// are not latency checks.
const badPatience = 10 * time.Second

// garbageHosts returns hosts text of exactly size bytes: the valid lines,
// then junk lines each of which is one parse error by construction (a first
// field that is no IP address, an address without a name, or an address
// with one invalid name), with the valid lines in between kept intact. It
// returns the number of junk lines.
func garbageHosts(rng *rand.Rand, size int, valid []string) (string, int) {
	var b strings.Builder
	junkLines := 0
	// Junk: any bytes of valid UTF-8 except '\n' (a line end) and '#' (a comment).
	junkRunes := []rune("abcxyzABC019-_./:%!$&*()[]{}<>?|\\'\"`~^= \t\r\x00\x01\x07\x1b\x7f" +
		"üéß日本語\u00a0\u2028\u200b\ufeff\U0001F600")
	noSpace := []rune("/!$&*()[]{}<>?|\\'\"`~^=@,;üß日本語\U0001F600\x00\x01")
	junk := func(runes []rune, n int) string {
		s := make([]rune, n)
		for i := range s {
			s[i] = runes[rng.IntN(len(runes))]
		}
		return string(s)
	}
	line := func() string {
		switch rng.IntN(6) {
		case 0:
			return "z" + junk(junkRunes, rng.IntN(200))
		case 1:
			return fmt.Sprintf("10.%d.%d.%d%s", rng.IntN(256), rng.IntN(256), rng.IntN(256), junk([]rune(" \t\r"), rng.IntN(3)))
		case 2:
			return fmt.Sprintf("10.1.2.3 bad%sname", junk(noSpace, 1+rng.IntN(20)))
		case 3:
			return fmt.Sprintf("%d.%d.%d.%d\tnode-%d", 256+rng.IntN(700), rng.IntN(256), rng.IntN(256), rng.IntN(256), rng.IntN(1000))
		case 4:
			return "::ffff::1:" + junk([]rune("0123456789abcdefg:"), 1+rng.IntN(30)) + " node"
		default:
			return "10.1.2.3 " + strings.Repeat("x", 64) + ".too-long-label"
		}
	}
	write := func(s string) {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	for i, v := range valid {
		write(v)
		// Spread the valid lines through the first half.
		for range 500 * (i + 1) {
			write(line())
			junkLines++
		}
	}
	// One line of 64 KiB.
	write("z" + junk(noSpace, 64<<10))
	junkLines++
	for {
		l := line()
		if b.Len()+len(l)+1 > size-1 {
			break
		}
		write(l)
		junkLines++
	}
	// Pad the last junk line to the exact size.
	pad := size - b.Len()
	if pad > 0 {
		b.WriteString("z" + strings.Repeat("!", pad-1))
		junkLines++
	}
	return b.String(), junkLines
}

// The TestBadInputAPI* tests: garbage, oversized, binary, non-UTF-8 and
// CRLF records ConfigMaps, nodes with 50 addresses, and a headless tunnel
// Service, against the real apiserver, coredns-yurt and tunnel-nodes-sync.
// They share one control plane and one coredns-yurt (badAPI), in the order
// they are declared; the last closes it.

// badAPIFixture is what every TestBadInputAPI* test works on.
type badAPIFixture struct {
	tb    harness.TB // for what outlives one test: the sync
	cp    *harness.ControlPlane
	srv   *harness.CoreDNS
	valid []string // the records written first
	// nodeRecords is what the sync writes for the nodes of
	// TestBadInputAPINodeWith50Addresses; syncer is the sync it starts,
	// which runs on through TestBadInputAPIHeadlessTunnelService.
	nodeRecords map[string][]string
	syncer      *harness.Sync
}

var badAPI = &shared[*badAPIFixture]{build: func(tb harness.TB) *badAPIFixture {
	cp := harness.Start(tb, harness.Options{})
	cp.CreateService(tb, harness.TunnelService("10.96.0.9"))
	valid := []string{"10.96.0.9\tworker-1", "192.168.0.10\tmaster-1"}
	cp.ApplyConfigMap(tb, recordsConfigMap(valid...))
	srv := harness.StartCoreDNS(tb, cp.Kubeconfig, onlyYurthosts)
	expectAnswer(tb, badPatience, srv.DNSAddr, "worker-1", "A", "10.96.0.9")
	return &badAPIFixture{tb: tb, cp: cp, srv: srv, valid: valid, nodeRecords: map[string][]string{}}
}}

// alive fails t unless coredns-yurt runs and answers master-1.
func (f *badAPIFixture) alive(t *testing.T, after string) {
	t.Helper()
	if f.srv.Exited() {
		t.Fatalf("coredns-yurt exited after %s:\n%s", after, f.srv.Output())
	}
	r := harness.Dig(t, f.srv.DNSAddr, "master-1", "A")
	if r.Status == "SERVFAIL" || r.Status == "REFUSED" {
		t.Fatalf("after %s: master-1: %s", after, r.Status)
	}
}

// TestBadInputAPIGarbage: 1 MiB of junk lines around valid ones; the valid
// ones are answered, each junk line is one parse error.
func TestBadInputAPIGarbage(t *testing.T) {
	f := badAPI.get(t)
	cp, srv, valid := f.cp, f.srv, f.valid
	before := harness.Metric(t, srv.MetricsURL, badParseErrors)
	text, junk := garbageHosts(rand.New(rand.NewPCG(1, 2)), tunnelnodes.MaxHostsBytes,
		append(valid, "10.9.9.9\tgood-1", "fd00::9\tgood-1 good-2"))
	if len(text) != 1<<20 {
		t.Fatalf("garbage is %d bytes, want exactly 1 MiB", len(text))
	}
	cp.ApplyConfigMap(t, recordsConfigMap(text)) // the apiserver's limit is inclusive
	expectAnswer(t, badPatience, srv.DNSAddr, "good-1", "A", "10.9.9.9")
	expectAnswer(t, badPatience, srv.DNSAddr, "good-1", "AAAA", "fd00::9")
	expectAnswer(t, badPatience, srv.DNSAddr, "good-2", "AAAA", "fd00::9")
	expectAnswer(t, badPatience, srv.DNSAddr, "worker-1", "A", "10.96.0.9")
	expectAnswer(t, badPatience, srv.DNSAddr, "master-1", "A", "192.168.0.10")
	if got := harness.Metric(t, srv.MetricsURL, badParseErrors) - before; got != float64(junk) {
		t.Errorf("parse errors grew by %v, want %d (one per junk line)", got, junk)
	}
	if got := harness.Metric(t, srv.MetricsURL, badEntries); got != 4 {
		t.Errorf("entries = %v, want 4 (worker-1, master-1, good-1, good-2)", got)
	}
	if want := fmt.Sprintf("skipped %d malformed lines", junk); !strings.Contains(srv.Output(), want) {
		t.Errorf("no log line %q", want)
	}
	// Logged once per content, each junk excerpt bounded.
	for _, l := range strings.Split(srv.Output(), "\n") {
		if len(l) > 1000 {
			t.Errorf("a log line of %d bytes", len(l))
		}
	}
	t.Logf("1 MiB value: %d junk lines, all counted; 4 names served", junk)
	f.alive(t, "1 MiB of garbage")
}

// TestBadInputAPIOver1MiB: records over 1 MiB are rejected by the apiserver;
// the stored ones keep being answered.
func TestBadInputAPIOver1MiB(t *testing.T) {
	f := badAPI.get(t)
	ctx, cms, srv := context.Background(), f.cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace), f.srv
	before := harness.Metric(t, srv.MetricsURL, badParseErrors)
	cm, err := cms.Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[tunnelnodes.ConfigMapKey] = strings.Repeat("x", 1<<20+1)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("update to 1 MiB + 1 byte: want 422 Invalid (at most 1048576 bytes), got %v", err)
	}
	// Two keys count together.
	cm.Data = map[string]string{tunnelnodes.ConfigMapKey: "10.9.9.9\tgood-1", "other": strings.Repeat("x", 1<<20)}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("two keys over 1 MiB together: want 422 Invalid, got %v", err)
	}
	big := recordsConfigMap(strings.Repeat("y", 1<<20+1))
	big.Name = "yurt-tunnel-nodes-too-big"
	if _, err := cms.Create(ctx, big, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("create at 1 MiB + 1 byte: want 422 Invalid, got %v", err)
	}
	// Nothing reached coredns-yurt: same records, no new parse errors.
	expectAnswer(t, badPatience, srv.DNSAddr, "good-1", "A", "10.9.9.9")
	if got := harness.Metric(t, srv.MetricsURL, badParseErrors); got != before {
		t.Errorf("parse errors changed from %v to %v", before, got)
	}
	f.alive(t, "rejected updates")
}

// TestBadInputAPIBinaryData: the records ConfigMap's binaryData is ignored.
func TestBadInputAPIBinaryData(t *testing.T) {
	f := badAPI.get(t)
	ctx, cms, cp, srv, valid := context.Background(), f.cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace), f.cp, f.srv, f.valid
	before := harness.Metric(t, srv.MetricsURL, badParseErrors)
	cm := recordsConfigMap(valid...)
	cm.BinaryData = map[string][]byte{
		"tunnel-nodes.bin": []byte("10.5.5.5\tbin-node\n\xff\xfe\x00\x80garbage"),
		"blob":             {0xff, 0, 0xc3, 0x28, '\n', '\r'},
	}
	cp.ApplyConfigMap(t, cm)
	expectAnswer(t, badPatience, srv.DNSAddr, "good-1", "A", "NXDOMAIN") // the new data is live
	expectAnswer(t, badPatience, srv.DNSAddr, "worker-1", "A", "10.96.0.9")
	expectAnswer(t, badPatience, srv.DNSAddr, "bin-node", "A", "NXDOMAIN")
	if got := harness.Metric(t, srv.MetricsURL, badParseErrors); got != before {
		t.Errorf("binaryData was parsed: parse errors %v -> %v", before, got)
	}

	// The records key in both data and binaryData: rejected.
	dup := recordsConfigMap(valid...)
	dup.BinaryData = map[string][]byte{tunnelnodes.ConfigMapKey: []byte("10.5.5.5\tbin-node")}
	current, err := cms.Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current.Data, current.BinaryData = dup.Data, dup.BinaryData
	if _, err := cms.Update(ctx, current, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "duplicate of key present in binaryData") {
		t.Fatalf("records key in data and binaryData: want 422 Invalid, got %v", err)
	}

	// The records only in binaryData: not records (the key is read from
	// data, where tunnel-nodes-sync writes it). Then back to data.
	only := recordsConfigMap()
	only.Data = nil
	only.BinaryData = map[string][]byte{tunnelnodes.ConfigMapKey: []byte(strings.Join(valid, "\n"))}
	cp.ApplyConfigMap(t, only)
	expectAnswer(t, badPatience, srv.DNSAddr, "worker-1", "A", "NXDOMAIN")
	cp.ApplyConfigMap(t, recordsConfigMap(valid...))
	expectAnswer(t, badPatience, srv.DNSAddr, "worker-1", "A", "10.96.0.9")
	f.alive(t, "binaryData")
}

// TestBadInputAPINonUTF8: non-UTF-8 bytes in the records.
func TestBadInputAPINonUTF8(t *testing.T) {
	f := badAPI.get(t)
	ctx, cp, srv, valid := context.Background(), f.cp, f.srv, f.valid
	// A string field cannot carry bytes that are not UTF-8 in JSON:
	// client-go's JSON encoder turns each into U+FFFD on the way, and
	// over protobuf the apiserver stores what it got. Either way the
	// name is not a DNS name: skipped and counted, the rest served.
	text := "10.6.6.6\tutf8-\xff\xfe-node\n10.6.6.7\tafter-bad\n\xc3\x28\t10.6.6.8 z"
	for _, contentType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		cfg := rest.CopyConfig(cp.Config)
		cfg.ContentType = contentType
		client := kubernetes.NewForConfigOrDie(cfg)
		before := harness.Metric(t, srv.MetricsURL, badParseErrors)
		current, err := client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		current.Data = map[string]string{tunnelnodes.ConfigMapKey: text + "\n#" + contentType}
		current.BinaryData = nil
		stored, err := client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Update(ctx, current, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("%s: update with non-UTF-8 data: %v", contentType, err)
		}
		t.Logf("%s: stored as %q", contentType, stored.Data[tunnelnodes.ConfigMapKey][:30])
		expectAnswer(t, badPatience, srv.DNSAddr, "after-bad", "A", "10.6.6.7")
		expectAnswer(t, badPatience, srv.DNSAddr, "worker-1", "A", "NXDOMAIN")
		if got := harness.Metric(t, srv.MetricsURL, badParseErrors) - before; got != 2 {
			t.Errorf("%s: parse errors grew by %v, want 2 (the name with bad bytes, the line starting with them)", contentType, got)
		}
	}
	cp.ApplyConfigMap(t, recordsConfigMap(valid...))
	expectAnswer(t, badPatience, srv.DNSAddr, "worker-1", "A", "10.96.0.9")
	f.alive(t, "non-UTF-8")
}

// TestBadInputAPICRLF: CRLF line ends answer as LF ones do.
func TestBadInputAPICRLF(t *testing.T) {
	f := badAPI.get(t)
	cp, srv := f.cp, f.srv
	before := harness.Metric(t, srv.MetricsURL, badParseErrors)
	lines := []string{"10.96.0.9\tworker-1", "10.96.0.9\tworker-2 worker-2-alias", "192.168.0.10\tmaster-1", "fd00::10\tmaster-1", "# a comment", "", "192.168.0.11 master-2 # trailing"}
	crlf := strings.Join(lines, "\r\n") + "\r\n"
	cp.ApplyConfigMap(t, recordsConfigMap(crlf))
	expectAnswer(t, badPatience, srv.DNSAddr, "master-2", "A", "192.168.0.11")
	crlfAnswers := map[string]harness.DigResult{}
	for _, q := range [][2]string{{"worker-1", "A"}, {"worker-2", "A"}, {"worker-2-alias", "A"}, {"master-1", "A"}, {"master-1", "AAAA"}, {"master-2", "A"}, {"master-2", "AAAA"}} {
		crlfAnswers[q[0]+"/"+q[1]] = harness.Dig(t, srv.DNSAddr, q[0], q[1])
	}
	if got := harness.Metric(t, srv.MetricsURL, badParseErrors); got != before {
		t.Errorf("CRLF: parse errors grew from %v to %v, want no change", before, got)
	}
	if got := harness.Metric(t, srv.MetricsURL, badEntries); got != 5 {
		t.Errorf("CRLF: entries = %v, want 5", got)
	}
	// The same records with LF answer the same.
	cp.ApplyConfigMap(t, recordsConfigMap(strings.Join(lines, "\n")+"\n10.8.8.8 lf-marker"))
	expectAnswer(t, badPatience, srv.DNSAddr, "lf-marker", "A", "10.8.8.8")
	for q, want := range crlfAnswers {
		name, qtype, _ := strings.Cut(q, "/")
		got := harness.Dig(t, srv.DNSAddr, name, qtype)
		if got.Status != want.Status || !slices.Equal(got.Data(qtype), want.Data(qtype)) {
			t.Errorf("%s: CRLF answered %s %v, LF %s %v", q, want.Status, want.Data(qtype), got.Status, got.Data(qtype))
		}
	}
	expectAnswer(t, badPatience, srv.DNSAddr, "worker-2-alias", "A", "10.96.0.9")
	expectAnswer(t, badPatience, srv.DNSAddr, "master-1", "AAAA", "fd00::10")
	f.alive(t, "CRLF")
}

// TestBadInputAPINodeWith50Addresses: nodes with 50 addresses of every kind
// get their defined record from the sync, answered by coredns-yurt.
func TestBadInputAPINodeWith50Addresses(t *testing.T) {
	f := badAPI.get(t)
	cp, srv, nodeRecords := f.cp, f.srv, f.nodeRecords
	// Nodes with 50 addresses of every kind. The sync writes each node's
	// defined records (tunnelnodes.NodeAddresses: an edge node the tunnel
	// ClusterIP; else, per family, the first InternalIP of that family in
	// status order, else the first ExternalIP of that family) and
	// coredns-yurt answers them.
	v4 := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.50.1"}
	v6 := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00:50::1"}
	ext := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "198.51.100.50"}
	nodes := []struct {
		name  string
		edge  bool
		addrs []corev1.NodeAddress
	}{
		// The first InternalIP sits after 25 ExternalIPs, hostnames and DNS names.
		{"cloud-50", false, fiftyAddresses("cloud-50", 25, v4, true)},
		// The first InternalIP is IPv6: the first IPv4 one follows it.
		{"cloud-50-v6", false, fiftyAddresses("cloud-50-v6", 3, v6, true)},
		// No InternalIP at all: the first ExternalIP.
		{"cloud-50-ext", false, fiftyAddresses("cloud-50-ext", 0, ext, false)},
		// An edge node: the tunnel ClusterIP, whatever its addresses.
		{"edge-50", true, fiftyAddresses("edge-50", 10, v4, true)},
	}
	for _, n := range nodes {
		if len(n.addrs) != 50 {
			t.Fatalf("%s: %d addresses", n.name, len(n.addrs))
		}
		badNode(t, cp, n.name, n.edge, n.addrs)
	}
	// The defined records of each node, from the addresses as the
	// contract words it (not with the product's code).
	for _, n := range nodes[:3] {
		for _, v6 := range []bool{false, true} {
			for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
				i := slices.IndexFunc(n.addrs, func(a corev1.NodeAddress) bool {
					return a.Type == typ && strings.Contains(a.Address, ":") == v6
				})
				if i >= 0 {
					nodeRecords[n.name] = append(nodeRecords[n.name], n.addrs[i].Address)
					break
				}
			}
		}
	}
	nodeRecords["edge-50"] = []string{"10.96.0.9"}
	if fmt.Sprint(nodeRecords["cloud-50"]) != "[192.168.50.1 fd00:77::1d]" || fmt.Sprint(nodeRecords["cloud-50-v6"]) != "[192.168.77.11 fd00:50::1]" ||
		fmt.Sprint(nodeRecords["cloud-50-ext"]) != "[198.51.100.50 2001:db8::2]" {
		t.Fatalf("fixture: %v", nodeRecords)
	}
	var lines []string
	for name, ips := range nodeRecords {
		for _, ip := range ips {
			lines = append(lines, ip+"\t"+name)
		}
	}
	slices.Sort(lines)

	f.syncer = harness.StartSync(f.tb, cp.Kubeconfig, "--leader-elect=false")
	expectRecords(t, 10*time.Second, cp, lines...)
	before := harness.Metric(t, srv.MetricsURL, badParseErrors)
	expectNodeRecords(t, srv, nodeRecords)
	if got := harness.Metric(t, srv.MetricsURL, badParseErrors); got != before {
		t.Errorf("parse errors grew from %v to %v", before, got)
	}
	f.alive(t, "nodes with 50 addresses")
}

// TestBadInputAPIHeadlessTunnelService: a headless tunnel Service; the last
// TestBadInputAPI* test.
func TestBadInputAPIHeadlessTunnelService(t *testing.T) {
	f := badAPI.get(t)
	t.Cleanup(badAPI.close) // the last of them
	cp, srv, nodeRecords, syncer := f.cp, f.srv, f.nodeRecords, f.syncer
	if len(nodeRecords) == 0 {
		t.Skip("needs the records of TestBadInputAPINodeWith50Addresses")
	}
	// The tunnel Service turns headless: the sync has no ClusterIP to
	// write and keeps the stored records; coredns-yurt has no ClusterIP to
	// remap edge records to and answers them as written, both the
	// process that saw the old ClusterIP and one that never did.
	before := records(t, cp, tunnelnodes.ConfigMapName)
	cp.DeleteService(t, tunnelnodes.Namespace, tunnelnodes.ServiceName)
	svc := cp.CreateService(t, harness.TunnelService("None"))
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("service is not headless: %q", svc.Spec.ClusterIP)
	}
	// Each reconcile without a tunnel ClusterIP counts one no_tunnel_ip
	// error and writes nothing; wait for the one the new node causes.
	const noTunnelIP = `tunnel_nodes_sync_errors_total{reason="no_tunnel_ip"}`
	harness.Eventually(t, 10*time.Second, func() error {
		if harness.Metric(t, syncer.MetricsURL, noTunnelIP) < 1 {
			return fmt.Errorf("the sync has not seen the headless Service")
		}
		return nil
	})
	seen := harness.Metric(t, syncer.MetricsURL, noTunnelIP)
	badNode(t, cp, "cloud-late", false, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.50.99"}})
	fresh := harness.StartCoreDNS(t, cp.Kubeconfig, onlyYurthosts)
	harness.Eventually(t, 10*time.Second, func() error {
		if harness.Metric(t, syncer.MetricsURL, noTunnelIP) <= seen {
			return fmt.Errorf("the sync has not reconciled the new node")
		}
		return nil
	})
	if got := records(t, cp, tunnelnodes.ConfigMapName); got != before {
		t.Errorf("the sync rewrote the records with a headless tunnel Service:\n%s", got)
	}
	for _, s := range []*harness.CoreDNS{srv, fresh} {
		expectNodeRecords(t, s, nodeRecords)
		expectAnswer(t, badPatience, s.DNSAddr, "cloud-late", "A", "NXDOMAIN")
	}
	f.alive(t, "headless Service")
}

// expectNodeRecords checks dig answers each name its one address (and
// NODATA for the other family).
func expectNodeRecords(t *testing.T, srv *harness.CoreDNS, want map[string][]string) {
	t.Helper()
	for name, ips := range want {
		for _, qtype := range []string{"A", "AAAA"} {
			of := slices.DeleteFunc(slices.Clone(ips), func(ip string) bool { return netip.MustParseAddr(ip).Is6() != (qtype == "AAAA") })
			if len(of) == 0 {
				of = []string{"NODATA"}
			}
			expectAnswer(t, badPatience, srv.DNSAddr, name, qtype, of...)
		}
	}
}

// badNode creates a node with exactly these addresses (status through the
// status subresource, as the kubelet writes it).
func badNode(t *testing.T, cp *harness.ControlPlane, name string, edge bool, addrs []corev1.NodeAddress) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	if edge {
		n.Labels[tunnelnodes.EdgeNodeLabel] = "true"
	}
	created, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Addresses = addrs
	stored, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("node %s with %d addresses: %v", name, len(addrs), err)
	}
	if len(stored.Status.Addresses) != len(addrs) {
		t.Fatalf("node %s: %d addresses stored, want %d", name, len(stored.Status.Addresses), len(addrs))
	}
}

// fiftyAddresses builds 50 distinct addresses: hostnames, DNS names and
// External IPs (IPv4 and IPv6) throughout, first at position at, and after
// it (only when internal) InternalIPs of both families.
func fiftyAddresses(name string, at int, first corev1.NodeAddress, internal bool) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for i := 0; len(out) < 50; i++ {
		if len(out) == at {
			out = append(out, first)
			continue
		}
		var a corev1.NodeAddress
		switch i % 6 {
		case 0:
			a = corev1.NodeAddress{Type: corev1.NodeHostName, Address: fmt.Sprintf("%s-h%d", name, i)}
		case 1:
			a = corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: fmt.Sprintf("203.0.113.%d", i)}
		case 2:
			a = corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: fmt.Sprintf("2001:db8::%x", i)}
		case 3:
			a = corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: fmt.Sprintf("%s-%d.internal", name, i)}
		case 4:
			a = corev1.NodeAddress{Type: corev1.NodeExternalDNS, Address: fmt.Sprintf("%s-%d.example.com", name, i)}
		default:
			switch {
			case !internal || len(out) < at:
				a = corev1.NodeAddress{Type: corev1.NodeHostName, Address: fmt.Sprintf("%s-x%d", name, i)}
			case i%12 == 5:
				a = corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("fd00:77::%x", i)}
			default:
				a = corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.77.%d", i)}
			}
		}
		out = append(out, a)
	}
	return out
}
