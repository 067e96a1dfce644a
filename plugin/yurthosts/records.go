package yurthosts

import (
	"maps"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
)

// records is an immutable snapshot of everything yurthosts answers: a table
// per shard of the set served, or one of the single ConfigMap. It is built
// off the query path and published with one atomic pointer swap. A change
// of some shards publishes a copy with their tables replaced (with), so its
// cost is that of the shards, not of the fleet.
type records struct {
	// tables[i] answers the names of shard i, those with
	// tunnelnodes.ShardOf(name, len(tables)) == i: a name is looked up in
	// its own shard only.
	tables []*table
	// reverse holds, by ShardOf(reverse name, len(tables)), the indexes of
	// the tables that answer a reverse name, in order: several when nodes
	// of different shards share an address.
	reverse []map[string][]int32
	// names is how many names the tables answer together.
	names int
}

var emptyRecords = newRecords([]*table{newTable(recordGroup{})})

// tableIndexes backs the index lists of one table, nearly every reverse
// name's, without an allocation each: tableIndexes[i:i+1:i+1] is [i], and
// its capacity makes an append copy.
var tableIndexes = func() (ix [tunnelnodes.MaxShards]int32) {
	for i := range ix {
		ix[i] = int32(i)
	}
	return ix
}()

// buildRecords computes the snapshot from the records ConfigMap (its text
// under key and its TunnelClusterIPsAnnotation) and the tunnel Service, each
// nil when absent. It depends on nothing else, so every replica that sees
// the same two objects answers the same. Lines and names of the text that
// cannot be used are returned in skipped.
func buildRecords(cm *corev1.ConfigMap, key string, svc *corev1.Service) (*records, []tunnelnodes.LineError) {
	group, skipped := parseRecords(cm, key, svc)
	return newRecords([]*table{newTable(group)}), skipped
}

// newRecords is the snapshot of tables, tables[i] answering shard i of a
// set of len(tables), a power of two.
func newRecords(tables []*table) *records {
	r := &records{tables: tables, reverse: make([]map[string][]int32, len(tables))}
	for b := range r.reverse {
		r.reverse[b] = map[string][]int32{}
	}
	for i, t := range tables {
		r.names += len(t.hosts)
		for rev := range t.reverse {
			in := r.reverse[r.shardOf(rev)]
			in[rev] = indexList(in[rev], int32(i), true)
		}
	}
	return r
}

// with is r with the tables of changed, by index, in place of its own: a
// copy of the slices of pointers, and of the reverse index only the maps
// holding the reverse names of the old and new tables.
func (r *records) with(changed map[int]*table) *records {
	if len(changed) == 0 {
		return r
	}
	next := &records{tables: slices.Clone(r.tables), reverse: slices.Clone(r.reverse), names: r.names}
	copied := make(map[int]bool)
	for i, t := range changed {
		old := next.tables[i]
		next.tables[i] = t
		next.names += len(t.hosts) - len(old.hosts)
		for _, revs := range []map[string][]string{old.reverse, t.reverse} {
			for rev := range revs {
				b := next.shardOf(rev)
				if !copied[b] {
					next.reverse[b] = maps.Clone(next.reverse[b])
					copied[b] = true
				}
				_, has := t.reverse[rev]
				if in := indexList(next.reverse[b][rev], int32(i), has); len(in) > 0 {
					next.reverse[b][rev] = in
				} else {
					delete(next.reverse[b], rev)
				}
			}
		}
	}
	return next
}

// indexList is the ascending list in with i (has) or without it, in memory
// of its own: in may be shared with a published snapshot.
func indexList(in []int32, i int32, has bool) []int32 {
	out := make([]int32, 0, len(in)+1)
	for _, x := range in {
		if x != i {
			out = append(out, x)
		}
	}
	if has {
		at, _ := slices.BinarySearch(out, i)
		out = slices.Insert(out, at, i)
	}
	if len(out) == 1 {
		return tableIndexes[out[0] : out[0]+1 : out[0]+1]
	}
	return out
}

func (r *records) shardOf(name string) int { return tunnelnodes.ShardOf(name, len(r.tables)) }

// host is the addresses of fqdn (lower case, with its trailing dot), and
// whether the name exists.
func (r *records) host(fqdn string) (addrs, bool) {
	h, ok := r.tables[r.shardOf(strings.TrimSuffix(fqdn, "."))].hosts[fqdn]
	return h, ok
}

// ptr is the names of the reverse name rev, in the order of the tables:
// allocated only when several tables answer it.
func (r *records) ptr(rev string) []string {
	in := r.reverse[r.shardOf(rev)][rev]
	if len(in) == 1 {
		return r.tables[in[0]].reverse[rev]
	}
	var names []string
	for _, i := range in {
		names = append(names, r.tables[i].reverse[rev]...)
	}
	return names
}
