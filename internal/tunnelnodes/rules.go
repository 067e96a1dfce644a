package tunnelnodes

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// NodeAddresses appends to addrs the addresses a node's name must resolve
// to: the tunnel ClusterIP for an edge node (yurthosts answers the tunnel
// Service's ClusterIP of each family for it); for another node, per family
// (IPv4 first), its first InternalIP of that family, else its first
// ExternalIP of that family. An address that is not an IP is passed over;
// reason says why a node has none.
func NodeAddresses(addrs []netip.Addr, n *Node, tunnelIP netip.Addr) (_ []netip.Addr, isEdge bool, reason string) {
	if n.Edge {
		return append(addrs, tunnelIP), true, ""
	}
	var v4, v6 netip.Addr
	reason = "no InternalIP or ExternalIP"
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range n.Addresses {
			if a.Type != t {
				continue
			}
			addr, err := netip.ParseAddr(a.Address)
			if err != nil || addr.Zone() != "" {
				reason = "address " + truncate(a.Address) + " is not an IP"
				continue
			}
			switch addr = addr.Unmap(); {
			case addr.Is4() && !v4.IsValid():
				v4 = addr
			case addr.Is6() && !v6.IsValid():
				v6 = addr
			}
		}
	}
	if !v4.IsValid() && !v6.IsValid() {
		return addrs, false, reason
	}
	for _, a := range []netip.Addr{v4, v6} {
		if a.IsValid() {
			addrs = append(addrs, a)
		}
	}
	return addrs, false, ""
}

// TunnelClusterIP is the tunnel Service's primary ClusterIP; invalid when
// the Service is missing or headless.
func TunnelClusterIP(svc *corev1.Service) netip.Addr {
	if svc == nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return netip.Addr{}
	}
	return a
}

// Rules is how a profile maps a node to the addresses its name resolves to,
// appended to addrs (a sync over 100,000 nodes then reuses one slice):
// tunneled when that is the tunnel (or proxy) ClusterIP; reason says why a
// node has no address.
type Rules func(addrs []netip.Addr, n *Node) (_ []netip.Addr, tunneled bool, reason string)

// YurtTunnelRules are yurt-tunnel's: edge nodes map to tunnelIP, the others
// to their own addresses (NodeAddresses).
func YurtTunnelRules(tunnelIP netip.Addr) Rules {
	return func(addrs []netip.Addr, n *Node) ([]netip.Addr, bool, string) {
		return NodeAddresses(addrs, n, tunnelIP)
	}
}
