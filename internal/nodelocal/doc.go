// Package nodelocal is the node side of NodeLocal DNS: the link-local
// address the node-local cache answers on, and the kubelet's clusterDNS
// that points the node's pods at it. Its functions run on the node, in
// install's per-node Jobs and the cache's init container.
package nodelocal

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Address is where the node-local cache answers on every node: upstream
// NodeLocal DNSCache's link-local address.
var Address = netip.MustParseAddr("169.254.20.10")

// Address6 is the cache's IPv6 address on a cluster with IPv6: a unique
// local address (RFC 4193) with a random Global ID, as upstream's docs ask
// for ("from the Unique Local Address range in IPv6 fd00::/8"). Not a
// fd00:: literal: networks that took fd00::/64 without drawing a Global ID
// would collide with it. Not fe80::: a link-local address needs an
// interface, and a pod's resolv.conf cannot name one the node's lo is on.
var Address6 = netip.MustParseAddr("fd84:5bd1:ae3::10")

// Addresses are the cache's addresses for the cluster's IP families, in
// their order (the primary family first): Address for IPv4, Address6 for
// IPv6. A family named twice, or an unknown one, is skipped.
func Addresses(families []corev1.IPFamily) []netip.Addr {
	var addrs []netip.Addr
	seen := map[corev1.IPFamily]bool{}
	for _, f := range families {
		if seen[f] {
			continue
		}
		seen[f] = true
		switch f {
		case corev1.IPv4Protocol:
			addrs = append(addrs, Address)
		case corev1.IPv6Protocol:
			addrs = append(addrs, Address6)
		}
	}
	return addrs
}

// Strings are addrs as text, in order.
func Strings(addrs []netip.Addr) []string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return s
}
