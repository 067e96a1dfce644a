package tunnelsync

import (
	"iter"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
)

// recordCounts says how many nodes became which kind of record.
type recordCounts struct {
	Edge, Cloud, Skipped int
}

// skippedNode is a node that could not be written, and why.
type skippedNode struct {
	Name, Reason string
}

// desiredRecords computes the records of all nodes (n of them) by the
// profile's rules, one entry per node. A node without an address, or whose name or address
// would break the hosts format, is skipped. Edge counts the nodes mapped to
// the tunnel.
func desiredRecords(nodes iter.Seq[*tunnelnodes.Node], n int, rules tunnelnodes.Rules) ([]tunnelnodes.HostEntry, recordCounts, []skippedNode) {
	var counts recordCounts
	var skipped []skippedNode
	entries := make([]tunnelnodes.HostEntry, 0, n)
	for n := range nodes {
		name, err := tunnelnodes.NormalizeName(n.Name)
		if err != nil || name != n.Name {
			skipped = append(skipped, skippedNode{n.Name, "name is not a lower-case DNS name"})
			continue
		}
		addr, isEdge, reason := rules(n)
		if reason != "" {
			skipped = append(skipped, skippedNode{n.Name, reason})
			continue
		}
		entries = append(entries, tunnelnodes.HostEntry{Addr: addr, Name: name})
		if isEdge {
			counts.Edge++
		} else {
			counts.Cloud++
		}
	}
	counts.Skipped = len(skipped)
	// The store is a map: name order keeps the skipped list (and its log
	// lines) the same from one sync to the next.
	slices.SortFunc(skipped, func(a, b skippedNode) int { return strings.Compare(a.Name, b.Name) })
	return entries, counts, skipped
}
