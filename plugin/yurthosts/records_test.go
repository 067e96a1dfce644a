package yurthosts

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

const testShardsNamespace = "test-shards"

// shardFixture is a watcher of shards and the Service whose stores the test
// fills by hand, as the reflectors would; every shard is at
// resourceVersion rv and triggered at trigger.
type shardFixture struct {
	w         *watcher
	published *records
	rv        int
	trigger   time.Time
}

func newShardFixture(t testing.TB, name string, svc *corev1.Service) *shardFixture {
	f := &shardFixture{trigger: time.Now()}
	f.w = newWatcher(source{configMapNamespace: "test", configMapName: name, configMapKey: tunnelnodes.ConfigMapKey,
		shardsNamespace: testShardsNamespace, serviceNamespace: tunnelnodes.Namespace, serviceName: tunnelnodes.ServiceName},
		nil, func(r *records) { f.published = r })
	f.w.shards = listedStore[*corev1.ConfigMap]("")
	f.w.services = listedStore[*corev1.Service](tunnelnodes.Namespace + "/" + tunnelnodes.ServiceName)
	if svc != nil {
		if err := f.w.services.Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// listedStore is a store as a reflector leaves it after its first list,
// without the reflector.
func listedStore[T k8sruntime.Object](key string) *objectStore[T] {
	s := &objectStore[T]{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), key: key, onChange: func() {}}
	s.listed.Store(true)
	return s
}

// writeSet stores text's entries as the shard set of count, annotated
// with the ClusterIPs annotated, each name in its shard.
func (f *shardFixture) writeSet(t testing.TB, count int, text, annotated string) {
	entries, _ := tunnelnodes.ParseHosts(text)
	byShard := make([][]tunnelnodes.HostEntry, count)
	for _, e := range entries {
		i := tunnelnodes.ShardOf(e.Name, count)
		byShard[i] = append(byShard[i], e)
	}
	for i, shard := range byShard {
		f.writeShard(t, count, i, tunnelnodes.RenderHosts(shard), annotated)
	}
}

// writeShard stores text, as written, as shard index of a set of count.
func (f *shardFixture) writeShard(t testing.TB, count, index int, text, annotated string) {
	f.rv++
	f.trigger = f.trigger.Add(time.Millisecond)
	if err := f.w.shards.Update(shardCM(f.w.src.configMapName, count, index, text, annotated, f.rv, f.trigger)); err != nil {
		t.Fatal(err)
	}
}

// shardCM is shard index of a set of count of records as the sync writes
// it, holding text rendered for the ClusterIPs annotated, at
// resourceVersion rv, triggered at trigger.
func shardCM(records string, count, index int, text, annotated string, rv int, trigger time.Time) *corev1.ConfigMap {
	name := tunnelnodes.ShardName(records, count, index)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: testShardsNamespace, Name: name, UID: types.UID(name),
			ResourceVersion: strconv.Itoa(rv),
			Labels:          map[string]string{tunnelnodes.RecordsOfLabel: records},
			Annotations: map[string]string{tunnelnodes.ShardAnnotation: tunnelnodes.FormatShard(index, count),
				tunnelnodes.TunnelClusterIPsAnnotation:      annotated,
				tunnelnodes.LastChangeTriggerTimeAnnotation: trigger.Format(time.RFC3339Nano)}},
		Data: map[string]string{tunnelnodes.ConfigMapKey: text},
	}
}

// full is the records a watcher that has seen none before builds of the
// same objects.
func (f *shardFixture) full() *records {
	var full *records
	src := f.w.src
	src.configMapNamespace = "afresh" // its own metrics
	w := newWatcher(src, nil, func(r *records) { full = r })
	w.shards, w.services = f.w.shards, f.w.services
	w.rebuild()
	return full
}

// answers are every name's and reverse name's answers of r, and which
// tables answer each reverse name.
func answers(r *records) map[string]string {
	out := map[string]string{}
	for _, in := range r.reverse {
		for rev, tables := range in {
			out["tables of "+rev] = fmt.Sprint(tables)
		}
	}
	for _, t := range r.tables {
		for name := range t.hosts {
			h, _ := r.host(name)
			out[name] = fmt.Sprint(h.v4, h.v6)
		}
		for rev := range t.reverse {
			out[rev] = fmt.Sprint(r.ptr(rev))
		}
	}
	return out
}

// The names' shards in a set of 4 and of 8, as FNV-1a puts them.
var testShards = map[string][2]int{"edge-1": {2, 6}, "edge-2": {3, 3}, "edge-3": {0, 0}, "master-1": {1, 1},
	"cloud-1": {0, 0}, "cloud-3": {2, 6}, "new-1": {3, 7}}

// TestShardChanges: the records of a shard set follow each shard's change
// by rebuilding that shard's table alone, and answer as records built
// afresh from the same objects would; a Service change and a new set
// rebuild every table.
func TestShardChanges(t *testing.T) {
	for name, want := range testShards {
		if got := [2]int{tunnelnodes.ShardOf(name, 4), tunnelnodes.ShardOf(name, 8)}; got != want {
			t.Fatalf("%s is in shards %v, the test says %v", name, got, want)
		}
	}
	const text = "10.96.0.9\tedge-1\n10.96.0.9\tedge-2\n192.168.0.2\tmaster-1\nfd00::2\tmaster-1\n" +
		"192.168.0.3\tcloud-1\n192.168.0.3\tcloud-3"
	const (
		ptr3 = "3.0.168.192.in-addr.arpa."
		ptr4 = "4.0.168.192.in-addr.arpa."
	)
	f := newShardFixture(t, "shard-changes", tunnelService("10.96.0.9"))
	errs := parseErrors.WithLabelValues("test/shard-changes")
	y := newTestPlugin("", tunnel{}, fall.Zero)
	steps := []struct {
		name   string
		change func()
		// rebuilt are the tables built anew; nil: all of them.
		rebuilt []int
		cases   []test.Case
	}{
		{"the set", func() { f.writeSet(t, 4, text, "10.96.0.9") }, nil, []test.Case{
			{Qname: "edge-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-1. 5 IN A 10.96.0.9")}},
			{Qname: "edge-1.", Qtype: dns.TypeAAAA},
			{Qname: "master-1.", Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA("master-1. 5 IN AAAA fd00::2")}},
			{Qname: "nope.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError},
			// Names of shards 0 and 2 share an address.
			{Qname: ptr3, Qtype: dns.TypePTR, Answer: []dns.RR{test.PTR(ptr3 + " 5 IN PTR cloud-1."), test.PTR(ptr3 + " 5 IN PTR cloud-3.")}},
		}},
		{"a node's address changes", func() { f.writeShard(t, 4, 2, "10.96.0.9\tedge-1\n192.168.0.4\tcloud-3", "10.96.0.9") }, []int{2}, []test.Case{
			{Qname: "cloud-3.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("cloud-3. 5 IN A 192.168.0.4")}},
			{Qname: ptr3, Qtype: dns.TypePTR, Answer: []dns.RR{test.PTR(ptr3 + " 5 IN PTR cloud-1.")}},
			{Qname: ptr4, Qtype: dns.TypePTR, Answer: []dns.RR{test.PTR(ptr4 + " 5 IN PTR cloud-3.")}},
		}},
		{"a node joins", func() { f.writeShard(t, 4, 3, "10.96.0.9\tedge-2\n10.96.0.9\tnew-1", "10.96.0.9") }, []int{3}, []test.Case{
			{Qname: "new-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("new-1. 5 IN A 10.96.0.9")}},
			{Qname: "edge-2.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-2. 5 IN A 10.96.0.9")}},
		}},
		{"a node leaves", func() { f.writeShard(t, 4, 0, "", "10.96.0.9") }, []int{0}, []test.Case{
			{Qname: "cloud-1.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError},
			{Qname: ptr3, Qtype: dns.TypePTR, Rcode: dns.RcodeRefused},
		}},
		// Looked up in shard 0, edge-3 is not there: skipped and counted.
		{"a name in another shard's text", func() { f.writeShard(t, 4, 3, "10.96.0.9\tedge-2\n10.96.0.9\tnew-1\n10.96.0.9\tedge-3", "10.96.0.9") }, []int{3}, []test.Case{
			{Qname: "edge-3.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError},
			{Qname: "new-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("new-1. 5 IN A 10.96.0.9")}},
		}},
		{"the Service is recreated", func() {
			if err := f.w.services.Update(tunnelService("10.96.5.5")); err != nil {
				t.Fatal(err)
			}
		}, nil, []test.Case{
			{Qname: "edge-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("edge-1. 5 IN A 10.96.5.5")}},
			{Qname: "new-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("new-1. 5 IN A 10.96.5.5")}},
		}},
		{"a set of 8 is written after", func() { f.writeSet(t, 8, text, "10.96.0.9") }, nil, []test.Case{
			{Qname: "cloud-1.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("cloud-1. 5 IN A 192.168.0.3")}},
			{Qname: "new-1.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError},
			{Qname: ptr3, Qtype: dns.TypePTR, Answer: []dns.RR{test.PTR(ptr3 + " 5 IN PTR cloud-1."), test.PTR(ptr3 + " 5 IN PTR cloud-3.")}},
		}},
	}
	for _, step := range steps {
		before := f.published
		step.change()
		f.w.rebuild()
		if !maps.Equal(answers(f.published), answers(f.full())) {
			t.Fatalf("%s: answers %v, built afresh %v", step.name, answers(f.published), answers(f.full()))
		}
		if step.rebuilt != nil {
			for i, tbl := range f.published.tables {
				if rebuilt := tbl != before.tables[i]; rebuilt != slices.Contains(step.rebuilt, i) {
					t.Errorf("%s: table %d rebuilt: %v", step.name, i, rebuilt)
				}
			}
		}
		y.records.Store(f.published)
		for _, tc := range step.cases {
			rcode, m := serve(t, y, tc)
			if tc.Rcode == dns.RcodeRefused {
				if m != nil {
					t.Errorf("%s: %s %s: want the next plugin, got %v", step.name, tc.Qname, dns.TypeToString[tc.Qtype], m)
				}
				continue
			}
			if m == nil || rcode != tc.Rcode {
				t.Errorf("%s: %s %s: rcode %d, msg %v", step.name, tc.Qname, dns.TypeToString[tc.Qtype], rcode, m)
				continue
			}
			if err := test.SortAndCheck(m, tc); err != nil {
				t.Errorf("%s: %s %s: %v", step.name, tc.Qname, dns.TypeToString[tc.Qtype], err)
			}
		}
	}
	if got := testutil.ToFloat64(errs); got != 1 {
		t.Errorf("parse errors %v, want 1 (edge-3 in shard 3)", got)
	}
	if got := testutil.ToFloat64(shardsServed.WithLabelValues("test/shard-changes")); got != 8 {
		t.Errorf("shards served %v, want 8", got)
	}
}

// TestShardChangesMatchAFullBuild: after any sequence of shard changes,
// names moving between addresses that nodes of other shards share, the
// records answer as records built afresh from the same objects.
func TestShardChangesMatchAFullBuild(t *testing.T) {
	const count = 8
	rng := rand.New(rand.NewPCG(1, 2))
	addrs := []string{"10.96.0.9", "192.168.0.1", "192.168.0.2", "192.168.0.3", "fd00::1", "fd00::2"}
	shardText := func(i int) string {
		var lines []string
		for n := range 40 {
			name := "node-" + strconv.Itoa(n)
			if tunnelnodes.ShardOf(name, count) == i && rng.IntN(3) > 0 {
				lines = append(lines, addrs[rng.IntN(len(addrs))]+"\t"+name)
			}
		}
		return strings.Join(lines, "\n")
	}
	f := newShardFixture(t, "match-full", tunnelService("10.96.0.9"))
	for i := range count {
		f.writeShard(t, count, i, shardText(i), "10.96.0.9")
	}
	f.w.rebuild()
	for step := range 200 {
		for range 1 + rng.IntN(2) {
			i := rng.IntN(count)
			f.writeShard(t, count, i, shardText(i), []string{"", "10.96.0.9"}[rng.IntN(2)])
		}
		if step%20 == 19 { // the Service goes or comes back
			var err error
			if f.w.services.object() != nil {
				err = f.w.services.Delete(tunnelService("10.96.0.9"))
			} else {
				err = f.w.services.Add(tunnelService("10.96.0.9"))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		f.w.rebuild()
		if got, want := answers(f.published), answers(f.full()); !maps.Equal(got, want) {
			t.Fatalf("answers %v, built afresh %v", got, want)
		}
		if full := f.full(); f.published.names != full.names {
			t.Fatalf("%d names, built afresh %d", f.published.names, full.names)
		}
	}
}

// BenchmarkShardChange is the cost of taking one shard's change at 100,000
// names in 4,096 shards: "full" builds every shard's table (what each
// change cost when the records were one table, and what a Service change
// costs now), "shard" the changed shard's table alone.
func BenchmarkShardChange(b *testing.B) {
	const names, count = 100_000, tunnelnodes.MaxShards
	// A tenth of the nodes are cloud nodes, at addresses of their own.
	addr := func(i int) string {
		if i%10 == 0 {
			return fmt.Sprintf("192.168.%d.%d", i/250%256, i%250+1)
		}
		return "10.96.0.9"
	}
	entries := make([][]string, count)
	for i := range names {
		name := fmt.Sprintf("node-%06d", i)
		shard := tunnelnodes.ShardOf(name, count)
		entries[shard] = append(entries[shard], addr(i)+"\t"+name)
	}
	// Each shard as written, and with its first node moved to the tunnel or
	// away from it.
	texts := make([][2]string, count)
	for i, lines := range entries {
		texts[i][0] = strings.Join(lines, "\n")
		moved := slices.Clone(lines)
		if addr, name, _ := strings.Cut(moved[0], "\t"); addr == "10.96.0.9" {
			moved[0] = "192.168.255.1\t" + name
		} else {
			moved[0] = "10.96.0.9\t" + name
		}
		texts[i][1] = strings.Join(moved, "\n")
	}
	f := newShardFixture(b, "bench", tunnelService("10.96.0.9"))
	for i := range count {
		f.writeShard(b, count, i, texts[i][0], "10.96.0.9")
	}
	f.w.rebuild()

	b.Run("full", func(b *testing.B) {
		ips := []string{"10.96.5.5", "10.96.0.9"}
		for i := 0; b.Loop(); i++ {
			if err := f.w.services.Update(tunnelService(ips[i%2])); err != nil {
				b.Fatal(err)
			}
			f.w.rebuild()
		}
	})
	b.Run("shard", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			shard := i % count
			f.writeShard(b, count, shard, texts[shard][1-i/count%2], "10.96.0.9")
			f.w.rebuild()
		}
	})
}
