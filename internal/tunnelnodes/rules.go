package tunnelnodes

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// NodeAddress is the address a node's name must resolve to: the tunnel
// ClusterIP for an edge node, else the node's first InternalIP, else its
// first ExternalIP. reason says why there is none.
func NodeAddress(n *Node, tunnelIP netip.Addr) (addr netip.Addr, isEdge bool, reason string) {
	if n.Edge {
		return tunnelIP, true, ""
	}
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range n.Addresses {
			if a.Type != t {
				continue
			}
			addr, err := netip.ParseAddr(a.Address)
			if err != nil || addr.Zone() != "" {
				return netip.Addr{}, false, "address " + truncate(a.Address) + " is not an IP"
			}
			return addr.Unmap(), false, ""
		}
	}
	return netip.Addr{}, false, "no InternalIP or ExternalIP"
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

// Rules is how a profile maps a node to the address its name resolves to:
// tunneled when that is the tunnel (or proxy) ClusterIP; reason says why a
// node has no address.
type Rules func(n *Node) (addr netip.Addr, tunneled bool, reason string)

// YurtTunnelRules are yurt-tunnel's: edge nodes map to tunnelIP, the others
// to their own address (NodeAddress).
func YurtTunnelRules(tunnelIP netip.Addr) Rules {
	return func(n *Node) (netip.Addr, bool, string) { return NodeAddress(n, tunnelIP) }
}
