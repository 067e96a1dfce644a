package tunnelnodes

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Sharded records. One records ConfigMap is resent whole to every watcher on
// each change (one coredns-yurt per node) and caps out at 1 MiB (~35,000
// nodes), so the sync also writes the records as a set of small ConfigMaps,
// shards, and yurthosts serves their union:
//
//   - Shards live in ShardsNamespace, which holds nothing else: RBAC cannot
//     grant list/watch by label, and resourceNames allow one object per watch,
//     so a namespace of their own is the tightest grant for one watch of all.
//   - Shard i of a set of S is named ShardName(records, S, i) (for example
//     yurt-tunnel-nodes-512-17), carries the label RecordsOfLabel=records and
//     the annotation ShardAnnotation "i/S", and holds under ConfigMapKey the
//     records of the names with ShardOf(name, S) == i, in the byte format of
//     RenderHosts, with LastChangeTriggerTimeAnnotation and
//     TunnelClusterIPsAnnotation as on the single ConfigMap.
//   - All S shards of a set exist, empty ones included, so a reader tells a
//     missing shard from an empty one. Readers serve the union of the set
//     ServedShardSet picks (complete, most recently written); with no complete
//     set they serve the single ConfigMap.
//   - S changes only by writing the whole new set and then deleting the old
//     one: a name that moves to another shard never disappears.
const (
	// ShardsNamespace holds the shards and nothing else.
	ShardsNamespace = "yurtdns-records"
	// RecordsOfLabel names the single records ConfigMap the shard belongs to:
	// a reader's one label-selected watch.
	RecordsOfLabel = "yurtdns.io/records-of"
	// ShardAnnotation is "INDEX/COUNT" of the shard in its set.
	ShardAnnotation = "yurtdns.io/records-shard"

	// NamesPerShard is the most names a shard holds on average before the set
	// doubles; it halves below a quarter of that (hysteresis, so a cluster at
	// a boundary does not reshard back and forth). 16 names keep one node
	// change under 1% of the single ConfigMap's bytes at 5,000 nodes.
	NamesPerShard = 16
	// MaxShards bounds the objects of a set: 4096 holds 65,536 nodes at 16
	// names each, 100,000 at 24.
	MaxShards = 4096
	// shardNameSuffixLen is the longest "-COUNT-INDEX" ShardName appends.
	shardNameSuffixLen = len("-4096-4095")
)

// ShardCount is the number of shards for n names when the set stored now has
// current shards (0: none): current while the average stays within
// (NamesPerShard/4, NamesPerShard], else the power of two that brings it to
// (NamesPerShard/2, NamesPerShard]; at most MaxShards.
func ShardCount(n, current int) int {
	ideal := 1
	if n > NamesPerShard {
		ideal = 1 << bits.Len(uint((n+NamesPerShard-1)/NamesPerShard-1))
	}
	ideal = min(ideal, MaxShards)
	if current == ideal || current == 2*ideal {
		return current
	}
	return ideal
}

// ShardOf is the index of name's shard in a set of count (a power of two):
// FNV-1a, so it depends on the name alone and is the same in every process.
// Inlined rather than hash/fnv: readers hash every query name, and this
// allocates nothing.
func ShardOf(name string, count int) int {
	const offset32, prime32 = 2166136261, 16777619
	h := uint32(offset32)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= prime32
	}
	return int(h & uint32(count-1))
}

// ParseShardHosts reads the text of shard index of a set of count as
// ParseHosts does, and skips the names of other shards: a reader looks a
// name up in its own shard only.
func ParseShardHosts(text string, index, count int) (entries []HostEntry, skipped []LineError) {
	return parseHosts(text, func(name string) error {
		if i := ShardOf(name, count); i != index {
			return fmt.Errorf("name %q belongs to shard %s, not %s", truncate(name), FormatShard(i, count), FormatShard(index, count))
		}
		return nil
	})
}

// ShardName is the name of shard index of a set of count for records.
func ShardName(records string, count, index int) string {
	return records + "-" + strconv.Itoa(count) + "-" + strconv.Itoa(index)
}

// isShardName: name is ShardName(records, count, index), told without
// building that string (readers check every shard on each change).
func isShardName(name, records string, count, index int) bool {
	var buf [shardNameSuffixLen]byte
	suffix := strconv.AppendInt(append(strconv.AppendInt(append(buf[:0], '-'), int64(count), 10), '-'), int64(index), 10)
	rest, ok := strings.CutPrefix(name, records)
	return ok && rest == string(suffix)
}

// ValidShardsOf reports whether records (a ConfigMap name) leaves room for
// the suffix of every shard name within the 253 bytes of an object name.
func ValidShardsOf(records string) error {
	if len(records)+shardNameSuffixLen > 253 {
		return fmt.Errorf("%q is too long to name its shards (at most %d bytes)", truncate(records), 253-shardNameSuffixLen)
	}
	return nil
}

// FormatShard renders the ShardAnnotation value.
func FormatShard(index, count int) string { return strconv.Itoa(index) + "/" + strconv.Itoa(count) }

// ParseShard reads a ShardAnnotation value: INDEX/COUNT with COUNT a power of
// two up to MaxShards and 0 <= INDEX < COUNT, both in plain decimal: exactly
// what FormatShard writes, so one shard has one spelling.
func ParseShard(value string) (index, count int, err error) {
	i, c, ok := strings.Cut(value, "/")
	if !ok {
		return 0, 0, fmt.Errorf("shard %q is not INDEX/COUNT", truncate(value))
	}
	index, err1 := decimal(i)
	count, err2 := decimal(c)
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("shard %q is not INDEX/COUNT", truncate(value))
	case count < 1 || count > MaxShards || count&(count-1) != 0:
		return 0, 0, fmt.Errorf("shard %q: count must be a power of two from 1 to %d", truncate(value), MaxShards)
	case index >= count:
		return 0, 0, fmt.Errorf("shard %q: index must be below the count", truncate(value))
	}
	return index, count, nil
}

// decimal parses 1 to 4 ASCII digits as FormatShard writes them: no sign,
// no spaces, no leading zero, no other base.
func decimal(s string) (int, error) {
	if len(s) == 0 || len(s) > 4 || (len(s) > 1 && s[0] == '0') {
		return 0, strconv.ErrSyntax
	}
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// ShardSet is one set of shards, by index.
type ShardSet struct {
	Count  int
	Shards []*corev1.ConfigMap // Shards[i] is shard i; nil where missing
}

// Complete reports whether every shard of the set exists.
func (s ShardSet) Complete() bool {
	for _, cm := range s.Shards {
		if cm == nil {
			return false
		}
	}
	return s.Count > 0
}

// LatestTrigger is the newest TriggerTime of the set's shards: the change
// the sync last wrote into it.
func (s ShardSet) LatestTrigger() time.Time {
	var latest time.Time
	for _, cm := range s.Shards {
		if t := TriggerTime(cm); t.After(latest) {
			latest = t
		}
	}
	return latest
}

// TriggerTime is the LastChangeTriggerTimeAnnotation of cm; zero when cm is
// nil or the annotation is missing or unreadable.
func TriggerTime(cm *corev1.ConfigMap) time.Time {
	if cm == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, cm.Annotations[LastChangeTriggerTimeAnnotation])
	if err != nil {
		return time.Time{}
	}
	return t
}

// ShardSets groups the shards of records among cms by count. A ConfigMap
// counts only if its label, annotation and name agree; the others are in
// strays (the sync deletes them).
func ShardSets(records string, cms []*corev1.ConfigMap) (sets map[int]*ShardSet, strays []*corev1.ConfigMap) {
	sets = map[int]*ShardSet{}
	for _, cm := range cms {
		if cm.Labels[RecordsOfLabel] != records {
			continue
		}
		index, count, err := ParseShard(cm.Annotations[ShardAnnotation])
		if err != nil || !isShardName(cm.Name, records, count, index) {
			strays = append(strays, cm)
			continue
		}
		set, ok := sets[count]
		if !ok {
			set = &ShardSet{Count: count, Shards: make([]*corev1.ConfigMap, count)}
			sets[count] = set
		}
		set.Shards[index] = cm
	}
	return sets, strays
}

// ServedShardSet is the set readers serve: of the complete sets, the one
// written last (the larger on a tie). ok is false when no set is complete.
// It depends only on the objects, so every reader picks the same set.
func ServedShardSet(sets map[int]*ShardSet) (served ShardSet, ok bool) {
	// The triggers are read only when two sets are complete (a reshard):
	// each read parses every shard's.
	var servedT time.Time
	for _, set := range sets {
		if !set.Complete() {
			continue
		}
		if !ok {
			served, ok = *set, true
			continue
		}
		if servedT.IsZero() {
			servedT = served.LatestTrigger()
		}
		if t := set.LatestTrigger(); t.After(servedT) || (t.Equal(servedT) && set.Count > served.Count) {
			served, servedT = *set, t
		}
	}
	return served, ok
}
