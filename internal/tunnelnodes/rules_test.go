package tunnelnodes

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A cloud node's names: per family, the first InternalIP of that family,
// else the first ExternalIP of that family; an edge node's: the tunnel
// ClusterIP. The addresses are appended to the caller's slice.
func TestNodeAddresses(t *testing.T) {
	in := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	ex := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a} }
	tunnel := netip.MustParseAddr("10.96.0.9")
	for _, tc := range []struct {
		name   string
		node   Node
		want   string // the addresses, or the reason
		isEdge bool
	}{
		{"v4", Node{Addresses: []corev1.NodeAddress{in("192.0.2.1"), in("192.0.2.2")}}, "[192.0.2.1]", false},
		{"v6", Node{Addresses: []corev1.NodeAddress{in("2001:db8::1")}}, "[2001:db8::1]", false},
		{"dual, v6 first", Node{Addresses: []corev1.NodeAddress{in("2001:db8::1"), in("2001:db8::2"), in("192.0.2.1")}}, "[192.0.2.1 2001:db8::1]", false},
		{"v6 from ExternalIP", Node{Addresses: []corev1.NodeAddress{ex("2001:db8::9"), in("192.0.2.1"), ex("203.0.113.1")}}, "[192.0.2.1 2001:db8::9]", false},
		{"ExternalIPs only", Node{Addresses: []corev1.NodeAddress{ex("203.0.113.1"), ex("2001:db8::9")}}, "[203.0.113.1 2001:db8::9]", false},
		{"v4-mapped is v4", Node{Addresses: []corev1.NodeAddress{in("::ffff:192.0.2.7"), in("192.0.2.1")}}, "[192.0.2.7]", false},
		{"bad one passed over", Node{Addresses: []corev1.NodeAddress{in("not-an-ip"), in("fe80::1%eth0"), in("192.0.2.1")}}, "[192.0.2.1]", false},
		{"only bad", Node{Addresses: []corev1.NodeAddress{in("not-an-ip")}}, `address not-an-ip is not an IP`, false},
		{"none", Node{}, "no InternalIP or ExternalIP", false},
		{"edge", Node{Edge: true, Addresses: []corev1.NodeAddress{in("192.0.2.1"), in("2001:db8::1")}}, "[10.96.0.9]", true},
	} {
		prefix := []netip.Addr{netip.MustParseAddr("198.51.100.1")}
		addrs, isEdge, reason := NodeAddresses(prefix[:1:1], &tc.node, tunnel)
		got := reason
		if reason == "" {
			if addrs[0] != prefix[0] {
				t.Errorf("%s: the caller's addresses were overwritten: %v", tc.name, addrs)
			}
			got = fmt.Sprint(addrs[1:])
		}
		if got != tc.want || isEdge != tc.isEdge {
			t.Errorf("%s: %s edge %v, want %s edge %v", tc.name, got, isEdge, tc.want, tc.isEdge)
		}
	}
}
