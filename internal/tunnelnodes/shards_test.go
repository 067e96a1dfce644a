package tunnelnodes

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestShardCount(t *testing.T) {
	for _, tc := range []struct{ names, current, want int }{
		{0, 0, 1},
		{16, 0, 1},
		{17, 0, 2},
		{5000, 0, 512}, // 9.8 names each
		{100000, 0, MaxShards},
		{1 << 30, 0, MaxShards},
		// Hysteresis: a set is kept while it averages (4, 16] names.
		{5000, 512, 512},
		{5000, 1024, 1024}, // 4.9 each
		{4096, 1024, 256},  // 4 each: back to 16
		{8193, 512, 1024},  // 16.002 each: doubles
		{8192, 512, 512},
		{3, 2, 2},
		{3, 4, 1},
		{100000, MaxShards, MaxShards},
	} {
		if got := ShardCount(tc.names, tc.current); got != tc.want {
			t.Errorf("ShardCount(%d, %d) = %d, want %d", tc.names, tc.current, got, tc.want)
		}
	}
}

// TestShardOfIsStable pins the hash: every sync and reader version must
// place a name in the same shard.
func TestShardOfIsStable(t *testing.T) {
	// FNV-1a of "a" is 0xe40c292c.
	if got := ShardOf("a", MaxShards); got != 0xe40c292c&(MaxShards-1) {
		t.Errorf("ShardOf(a) = %#x, want FNV-1a's %#x", got, 0xe40c292c&(MaxShards-1))
	}
	// It is hash/fnv's FNV-1a, without an allocation.
	for _, name := range []string{"", "edge-000001", "edge-node-1.example", strings.Repeat("x", 253)} {
		h := fnv.New32a()
		h.Write([]byte(name))
		if got, want := ShardOf(name, MaxShards), int(h.Sum32()&(MaxShards-1)); got != want {
			t.Errorf("ShardOf(%q) = %d, hash/fnv says %d", name, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { ShardOf("edge-000001", MaxShards) }); n != 0 {
		t.Errorf("ShardOf allocates %v times", n)
	}
	// Names spread: no shard of 512 holds more than 3× the mean of 5,000 names.
	counts := make([]int, 512)
	for i := range 5000 {
		counts[ShardOf(fmt.Sprintf("edge-%06d", i), 512)]++
	}
	for i, c := range counts {
		if c > 30 {
			t.Errorf("shard %d holds %d of 5000 names", i, c)
		}
	}
}

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		value        string
		index, count int
		err          string
	}{
		{"0/1", 0, 1, ""},
		{"17/512", 17, 512, ""},
		{"4095/4096", 4095, 4096, ""},
		{"0/8192", 0, 0, "power of two"},
		{"0/3", 0, 0, "power of two"},
		{"0/0", 0, 0, "power of two"},
		{"2/2", 0, 0, "below the count"},
		{"-1/2", 0, 0, "not INDEX/COUNT"},
		{"+1/2", 0, 0, "not INDEX/COUNT"},
		{" 1/2", 0, 0, "not INDEX/COUNT"},
		{"1/2/4", 0, 0, "not INDEX/COUNT"},
		{"1", 0, 0, "not INDEX/COUNT"},
		{"", 0, 0, "not INDEX/COUNT"},
		{"00001/2", 0, 0, "not INDEX/COUNT"},
		{"01/2", 0, 0, "not INDEX/COUNT"},
		{"1/04", 0, 0, "not INDEX/COUNT"},
	} {
		index, count, err := ParseShard(tc.value)
		switch {
		case tc.err == "" && (err != nil || index != tc.index || count != tc.count):
			t.Errorf("ParseShard(%q) = %d, %d, %v; want %d, %d", tc.value, index, count, err, tc.index, tc.count)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseShard(%q) error %v, want %q", tc.value, err, tc.err)
		}
	}
}

// FuzzParseShard: any annotation value parses to a valid shard of a valid
// count that formats back to the same value, or is an error.
// Seeds: testdata/fuzz/FuzzParseShard.
func FuzzParseShard(f *testing.F) {
	f.Fuzz(func(t *testing.T, value string) {
		index, count, err := ParseShard(value)
		if err != nil {
			return
		}
		if count < 1 || count > MaxShards || count&(count-1) != 0 || index < 0 || index >= count {
			t.Fatalf("ParseShard(%q) = %d/%d", value, index, count)
		}
		if FormatShard(index, count) != value {
			t.Fatalf("ParseShard(%q) = %d/%d, which formats as %q", value, index, count, FormatShard(index, count))
		}
	})
}

func shard(records string, index, count int, trigger time.Time) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:        ShardName(records, count, index),
		Labels:      map[string]string{RecordsOfLabel: records},
		Annotations: map[string]string{ShardAnnotation: FormatShard(index, count), LastChangeTriggerTimeAnnotation: trigger.Format(time.RFC3339Nano)},
	}}
}

func TestServedShardSet(t *testing.T) {
	const records = "yurt-tunnel-nodes"
	t0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	set := func(count int, trigger time.Time, skip ...int) []*corev1.ConfigMap {
		var out []*corev1.ConfigMap
		for i := range count {
			if !strings.Contains(fmt.Sprint(skip), fmt.Sprint(i)) || len(skip) == 0 {
				out = append(out, shard(records, i, count, trigger))
			}
		}
		return out
	}
	wrongName := shard(records, 0, 2, t0)
	wrongName.Name = "yurt-tunnel-nodes-2-1"
	otherRecords := shard("edge-tunnel-nodes", 0, 1, t0.Add(time.Hour))
	// Names near the right one: more after it, a zero before the count.
	longer, zeroed := shard(records, 0, 1, t0), shard(records, 0, 1, t0)
	longer.Name, zeroed.Name = "yurt-tunnel-nodes-1-0-old", "yurt-tunnel-nodes-01-0"
	for _, tc := range []struct {
		name       string
		cms        []*corev1.ConfigMap
		wantCount  int // 0: none complete
		wantStrays int
	}{
		{"none", nil, 0, 0},
		{"one complete set", set(4, t0), 4, 0},
		{"a shard missing", set(4, t0, 2), 0, 0},
		// A reshard wrote the new set (later) and has not yet deleted the old.
		{"the newer of two", append(set(4, t0), set(8, t0.Add(time.Second))...), 8, 0},
		{"the newer, smaller", append(set(8, t0), set(4, t0.Add(time.Second))...), 4, 0},
		{"the larger on a tie", append(set(4, t0), set(8, t0)...), 8, 0},
		{"the complete one", append(set(4, t0), set(8, t0.Add(time.Second), 7)...), 4, 0},
		{"name and annotation disagree", append(set(1, t0), wrongName), 1, 1},
		{"names near the shard's", []*corev1.ConfigMap{longer, zeroed}, 0, 2},
		{"another records' shard", append(set(2, t0), otherRecords), 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets, strays := ShardSets(records, tc.cms)
			served, ok := ServedShardSet(sets)
			if ok != (tc.wantCount > 0) || served.Count != tc.wantCount {
				t.Errorf("served %d shards (ok %v), want %d", served.Count, ok, tc.wantCount)
			}
			if len(strays) != tc.wantStrays {
				t.Errorf("%d strays, want %d", len(strays), tc.wantStrays)
			}
			for i, cm := range served.Shards {
				if cm.Name != ShardName(records, served.Count, i) {
					t.Errorf("shard %d is %s", i, cm.Name)
				}
			}
		})
	}
}

// TestParseShardHosts: a shard's text is read as ParseHosts reads it, and a
// name of another shard is skipped with its line, as a malformed one is.
func TestParseShardHosts(t *testing.T) {
	// Of a set of 2: a and c are in shard 0, b in shard 1 (FNV-1a's low bit).
	if ShardOf("a", 2) != 0 || ShardOf("b", 2) != 1 || ShardOf("c", 2) != 0 {
		t.Fatal("the test's names moved shards")
	}
	for _, tc := range []struct {
		name         string
		text         string
		index, count int
		want         []string // "addr name"
		skipped      []int    // lines
	}{
		{"all in their shard", "10.0.0.1 a\n10.0.0.3 c", 0, 2, []string{"10.0.0.1 a", "10.0.0.3 c"}, nil},
		{"a name of another shard", "10.0.0.1 a b\n10.0.0.2 b\n10.0.0.3 C", 0, 2, []string{"10.0.0.1 a", "10.0.0.3 c"}, []int{1, 2}},
		{"malformed and misplaced", "x a\n10.0.0.2 b a", 1, 2, []string{"10.0.0.2 b"}, []int{1, 2}},
		{"a set of one holds every name", "10.0.0.1 a b c", 0, 1, []string{"10.0.0.1 a", "10.0.0.1 b", "10.0.0.1 c"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, skipped := ParseShardHosts(tc.text, tc.index, tc.count)
			var got []string
			for _, e := range entries {
				got = append(got, e.Addr.String()+" "+e.Name)
			}
			var lines []int
			for _, s := range skipped {
				lines = append(lines, s.Line)
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(lines, tc.skipped) {
				t.Errorf("entries %q skipped lines %v (%v), want %q and %v", got, lines, skipped, tc.want, tc.skipped)
			}
		})
	}
}
