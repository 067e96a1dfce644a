package sync

import (
	"net/netip"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// recordCounts says how many nodes became which kind of record.
type recordCounts struct {
	Edge, Cloud, Skipped int
}

// skippedNode is a node that could not be written, and why.
type skippedNode struct {
	Name, Reason string
}

// desiredRecords computes the records text for all nodes: an edge node
// (selected by edge) maps to the tunnel ClusterIP; any other node to its
// first InternalIP, else its first ExternalIP. A node with neither, or whose
// name or address would break the hosts format, is skipped.
func desiredRecords(nodes []corev1.Node, edge labels.Selector, tunnelIP netip.Addr) (string, recordCounts, []skippedNode) {
	var counts recordCounts
	var skipped []skippedNode
	entries := make([]tunnelnodes.HostEntry, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		name, err := tunnelnodes.NormalizeName(n.Name)
		if err != nil || name != n.Name {
			skipped = append(skipped, skippedNode{n.Name, "name is not a lower-case DNS name"})
			continue
		}
		if edge.Matches(labels.Set(n.Labels)) {
			entries = append(entries, tunnelnodes.HostEntry{Addr: tunnelIP, Name: name})
			counts.Edge++
			continue
		}
		addr, reason := nodeAddress(n)
		if reason != "" {
			skipped = append(skipped, skippedNode{n.Name, reason})
			continue
		}
		entries = append(entries, tunnelnodes.HostEntry{Addr: addr, Name: name})
		counts.Cloud++
	}
	counts.Skipped = len(skipped)
	return tunnelnodes.RenderHosts(entries), counts, skipped
}

// nodeAddress picks a cloud node's address: first InternalIP, else first ExternalIP.
func nodeAddress(n *corev1.Node) (netip.Addr, string) {
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, a := range n.Status.Addresses {
			if a.Type != t {
				continue
			}
			addr, err := netip.ParseAddr(a.Address)
			if err != nil || addr.Zone() != "" {
				return netip.Addr{}, "address " + a.Address + " is not an IP"
			}
			return addr.Unmap(), ""
		}
	}
	return netip.Addr{}, "no InternalIP or ExternalIP"
}

// tunnelClusterIP is the Service's primary ClusterIP; invalid when the
// Service is missing or headless.
func tunnelClusterIP(svc *corev1.Service) netip.Addr {
	if svc == nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return netip.Addr{}
	}
	return a
}
