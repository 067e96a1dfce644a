// Package nodelocal is the node side of NodeLocal DNS: the link-local
// address the node-local cache answers on, and the kubelet's clusterDNS
// that points the node's pods at it. Its functions run on the node, in
// install's per-node Jobs and the cache's init container.
package nodelocal

import "net/netip"

// Address is where the node-local cache answers on every node: upstream
// NodeLocal DNSCache's link-local address.
var Address = netip.MustParseAddr("169.254.20.10")
