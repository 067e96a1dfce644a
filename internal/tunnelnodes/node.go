package tunnelnodes

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Node is all the records need of a Node, and all the sync keeps of one: a
// kubelet's Node is 12–15 KB of JSON (conditions, images, nodeInfo), this is
// about a hundred bytes.
type Node struct {
	Name string
	// Edge: the edge node selector selects the Node.
	Edge bool
	// Addresses are the Node's InternalIP and ExternalIP addresses, in its
	// order (the rules pick the first or last of a type).
	Addresses []corev1.NodeAddress
}

// NodeOf is what the records need of n, edge nodes selected by edge.
func NodeOf(n *corev1.Node, edge labels.Selector) Node {
	var addrs []corev1.NodeAddress
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			addrs = append(addrs, a)
		}
	}
	return Node{Name: n.Name, Edge: edge.Matches(labels.Set(n.Labels)), Addresses: slices.Clip(addrs)}
}

// Equal: a and b give the same records.
func (a *Node) Equal(b *Node) bool {
	return a.Name == b.Name && a.Edge == b.Edge && slices.Equal(a.Addresses, b.Addresses)
}
