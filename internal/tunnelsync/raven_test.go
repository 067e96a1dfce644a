package tunnelsync

import (
	"net/netip"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
)

// TestRavenRecordsGolden pins the records text under --profile raven to what
// yurt-manager's gateway-dns controller (openyurt
// pkg/yurtmanager/controller/raven/dns, buildDNSRecords and getHostIP)
// writes for the same nodes. The expected texts are worked out here from
// its rules, line by line, not produced by our code:
//   - proxy on (raven-cfg enable-l7-proxy "true", any case) and the proxy
//     Service has a ClusterIP: "<ClusterIP>\t<node>" for every node, whatever
//     its labels or addresses;
//   - otherwise "<ip>\t<node>" with ip the first InternalIP net.ParseIP
//     accepts, else the last such ExternalIP, printed by net.IP.String; a
//     node with neither is left out;
//   - lines sorted as strings, joined with "\n", no trailing newline.
func TestRavenRecordsGolden(t *testing.T) {
	addr := func(typ corev1.NodeAddressType, ip string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: typ, Address: ip}
	}
	nodes := []corev1.Node{
		node("master-1", false, addr(corev1.NodeHostName, "master-1"), internal("192.168.0.10"), internal("192.168.0.11")),
		node("edge-1", true, internal("10.0.0.1")),
		node("cloud-ext", false, external("203.0.113.7")),
		node("cloud-2ext", false, external("203.0.113.8"), external("203.0.113.9")),   // the last ExternalIP
		node("cloud-both", false, external("203.0.113.10"), internal("192.168.0.12")), // InternalIP wins
		node("cloud-badint", false, internal("not-an-ip"), external("203.0.113.11")),  // unparsable InternalIP passed over
		node("cloud-mapped", false, internal("::ffff:192.168.0.30")),                  // net.IP prints it as IPv4
		node("cloud-v6", false, internal("FD00::0:12")),                               // printed canonically
		node("cloud-none", false, addr(corev1.NodeHostName, "cloud-none")),
		node("cloud-dual", false, internal("192.168.0.40"), internal("fd00::40")), // one address, unlike yurt-tunnel's rules
	}
	offText := "10.0.0.1\tedge-1\n" +
		"192.168.0.10\tmaster-1\n" +
		"192.168.0.12\tcloud-both\n" +
		"192.168.0.30\tcloud-mapped\n" +
		"192.168.0.40\tcloud-dual\n" +
		"203.0.113.11\tcloud-badint\n" +
		"203.0.113.7\tcloud-ext\n" +
		"203.0.113.9\tcloud-2ext\n" +
		"fd00::12\tcloud-v6"
	onText := "10.96.100.7\tcloud-2ext\n" +
		"10.96.100.7\tcloud-badint\n" +
		"10.96.100.7\tcloud-both\n" +
		"10.96.100.7\tcloud-dual\n" +
		"10.96.100.7\tcloud-ext\n" +
		"10.96.100.7\tcloud-mapped\n" +
		"10.96.100.7\tcloud-none\n" +
		"10.96.100.7\tcloud-v6\n" +
		"10.96.100.7\tedge-1\n" +
		"10.96.100.7\tmaster-1"
	proxyIP := netip.MustParseAddr("10.96.100.7")
	for _, tc := range []struct {
		name    string
		cfg     map[string]string
		proxyIP netip.Addr
		want    string
		counts  recordCounts
	}{
		{"proxy on", map[string]string{tunnelnodes.RavenEnableProxyKey: "true"}, proxyIP, onText, recordCounts{Edge: 10}},
		{"proxy on, any case", map[string]string{tunnelnodes.RavenEnableProxyKey: "TRUE"}, proxyIP, onText, recordCounts{Edge: 10}},
		{"proxy off", map[string]string{tunnelnodes.RavenEnableProxyKey: "false"}, proxyIP, offText, recordCounts{Cloud: 9, Skipped: 1}},
		{"proxy key missing", map[string]string{"enable-l3-tunnel": "true"}, proxyIP, offText, recordCounts{Cloud: 9, Skipped: 1}},
		{"no raven-cfg", nil, proxyIP, offText, recordCounts{Cloud: 9, Skipped: 1}},
		{"proxy on, no ClusterIP", map[string]string{tunnelnodes.RavenEnableProxyKey: "true"}, netip.Addr{}, offText, recordCounts{Cloud: 9, Skipped: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := tunnelnodes.RavenRules(tunnelnodes.RavenProxyEnabled(tc.cfg), tc.proxyIP)
			entries, counts, _ := recordsOf(t, nodes, rules)
			text := tunnelnodes.RenderHosts(entries)
			if text != tc.want {
				t.Errorf("records text:\n%q\nwant (upstream's):\n%q", text, tc.want)
			}
			if counts != tc.counts {
				t.Errorf("counts = %+v, want %+v", counts, tc.counts)
			}
		})
	}
}
