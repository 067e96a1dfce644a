package tunnelsync

import (
	"context"
	"iter"
	"net/netip"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// recordCounts says how many nodes became which kind of record.
type recordCounts struct {
	Edge, Cloud, Skipped int
}

// skippedNode is a node that could not be written, and why.
type skippedNode struct {
	Name, Reason string
}

// desiredRecords computes the records of nodes (room made for n) by the
// profile's rules, one entry per address of a node (a dual-stack cloud node
// has two). A node without an address, or whose name would break the hosts
// format, is skipped. The counts are of nodes: Edge counts the nodes mapped
// to the tunnel.
func desiredRecords(nodes iter.Seq[*tunnelnodes.Node], n int, rules tunnelnodes.Rules) ([]tunnelnodes.HostEntry, recordCounts, []skippedNode) {
	var counts recordCounts
	var skipped []skippedNode
	entries := make([]tunnelnodes.HostEntry, 0, n)
	var addrs []netip.Addr
	for n := range nodes {
		name, err := tunnelnodes.NormalizeName(n.Name)
		if err != nil || name != n.Name {
			skipped = append(skipped, skippedNode{n.Name, "name is not a lower-case DNS name"})
			continue
		}
		var isEdge bool
		var reason string
		addrs, isEdge, reason = rules(addrs[:0], n)
		if reason != "" {
			skipped = append(skipped, skippedNode{n.Name, reason})
			continue
		}
		for _, a := range addrs {
			entries = append(entries, tunnelnodes.HostEntry{Addr: a, Name: name})
		}
		if isEdge {
			counts.Edge++
		} else {
			counts.Cloud++
		}
	}
	counts.Skipped = len(skipped)
	sortSkipped(skipped)
	return entries, counts, skipped
}

// sortSkipped puts skipped in name order: the store is a map, and the
// order keeps the list (and its log lines) the same from one sync to the
// next.
func sortSkipped(skipped []skippedNode) {
	slices.SortFunc(skipped, func(a, b skippedNode) int { return strings.Compare(a.Name, b.Name) })
}

// plus is the sum of c and d.
func (c recordCounts) plus(d recordCounts) recordCounts {
	return recordCounts{Edge: c.Edge + d.Edge, Cloud: c.Cloud + d.Cloud, Skipped: c.Skipped + d.Skipped}
}

// minus is c without d.
func (c recordCounts) minus(d recordCounts) recordCounts {
	return recordCounts{Edge: c.Edge - d.Edge, Cloud: c.Cloud - d.Cloud, Skipped: c.Skipped - d.Skipped}
}

// names is the number of records: the names written.
func (c recordCounts) names() int { return c.Edge + c.Cloud }

// bucketRecords are the records of the nodes of one bucket of the node
// store, and their counts.
type bucketRecords struct {
	entries []tunnelnodes.HostEntry
	counts  recordCounts
}

// setRecordsGauges publishes the records' counts.
func setRecordsGauges(c recordCounts) {
	recordsGauge.WithLabelValues("edge").Set(float64(c.Edge))
	recordsGauge.WithLabelValues("cloud").Set(float64(c.Cloud))
	recordsGauge.WithLabelValues("skipped").Set(float64(c.Skipped))
}

// logSkipped says, at V(1), which nodes have no record and why.
func logSkipped(ctx context.Context, skipped []skippedNode) {
	logger := log.FromContext(ctx)
	for _, s := range skipped {
		logger.V(1).Info("Node skipped", "node", s.Name, "reason", s.Reason)
	}
}
