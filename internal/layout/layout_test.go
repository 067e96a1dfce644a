package layout

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
)

func TestNamed(t *testing.T) {
	if l, err := Named(""); err != nil || l.Name != YurtTunnel {
		t.Errorf(`Named(""): %s %v, want the default %s`, l.Name, err, YurtTunnel)
	}
	if _, err := Named("wireguard"); err == nil || !strings.Contains(err.Error(), "must be one of yurt-tunnel, raven") {
		t.Errorf("an unknown layout: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a layout registered twice did not panic")
		}
	}()
	Register(Layout{Name: Raven})
}

// Where each shipped layout's rules send an edge and a cloud node (both
// dual-stack), and whether the records then carry the tunnel's ClusterIPs:
// yurt-tunnel's give a cloud node an address of each family, Raven's keep
// upstream's one.
func TestRules(t *testing.T) {
	tunnel := netip.MustParseAddr("10.96.0.9")
	dual := func(v4, v6 string) []corev1.NodeAddress {
		return []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: v4}, {Type: corev1.NodeInternalIP, Address: v6}}
	}
	edge := &tunnelnodes.Node{Name: "edge-1", Edge: true, Addresses: dual("192.0.2.2", "2001:db8::2")}
	cloud := &tunnelnodes.Node{Name: "cloud-1", Addresses: dual("192.0.2.1", "2001:db8::1")}
	proxyOn := map[string]string{tunnelnodes.RavenEnableProxyKey: "true"}
	for _, tc := range []struct {
		layout          string
		config          map[string]string
		tunnelIP        netip.Addr
		edge, cloud     string
		toTunnel, needs bool
	}{
		{YurtTunnel, nil, tunnel, "10.96.0.9", "192.0.2.1 2001:db8::1", true, true},
		{YurtTunnel, nil, netip.Addr{}, "invalid IP", "192.0.2.1 2001:db8::1", false, true},
		{Raven, proxyOn, tunnel, "10.96.0.9", "10.96.0.9", true, false},
		{Raven, nil, tunnel, "192.0.2.2", "192.0.2.1", false, false},
		{Raven, proxyOn, netip.Addr{}, "192.0.2.2", "192.0.2.1", false, false},
	} {
		l, err := Named(tc.layout)
		if err != nil {
			t.Fatal(err)
		}
		rules, toTunnel := l.Rules(tc.config, tc.tunnelIP)
		got := func(n *tunnelnodes.Node) string {
			addrs, _, _ := rules(nil, n)
			s := make([]string, len(addrs))
			for i, a := range addrs {
				s[i] = a.String()
			}
			return strings.Join(s, " ")
		}
		if got(edge) != tc.edge || got(cloud) != tc.cloud || toTunnel != tc.toTunnel || l.NeedsTunnel != tc.needs {
			t.Errorf("%s %v %v: edge %q cloud %q toTunnel %v needs %v, want %q %q %v %v", tc.layout, tc.config, tc.tunnelIP,
				got(edge), got(cloud), toTunnel, l.NeedsTunnel, tc.edge, tc.cloud, tc.toTunnel, tc.needs)
		}
	}
}
