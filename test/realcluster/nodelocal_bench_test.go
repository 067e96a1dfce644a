package realcluster

import (
	"context"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"
)

// BenchmarkNodeLocalDNS: from a pod's network namespace on master-1, the
// node-local cache (169.254.20.10 on the node, no DNAT, not tracked) against
// the kube-dns ClusterIP (kube-proxy's DNAT to a coredns-yurt pod, tracked),
// side by side in one run, each twice in alternating order: dnsperf's
// queries per second at full load, its per-query latency at a fixed 1,000
// QPS, and the conntrack entries that 300 one-shot queries (dig, a new
// socket each, as a libc resolver does) leave in the node's table.
func BenchmarkNodeLocalDNS(b *testing.B) {
	ctx := context.Background()
	// Made before install: its resolv.conf names kube-dns, so revert does
	// not wait for it.
	client := startPausePod(b, "dnsperf-client", kc.Master().Name)
	if out, err := runSync(b, "install", "--skip", "control-plane", "--node-local-dns"); err != nil {
		b.Fatalf("install --node-local-dns: %v\n%s", err, out)
	}
	defer func() {
		if out, err := runSync(b, "revert"); err != nil {
			b.Errorf("revert: %v\n%s", err, out)
		}
	}()
	names := []string{probeName, "kube-dns.kube-system.svc.cluster.local", "master-1", "worker-1"}
	queries := harness.WriteQueries(b, names, "A")
	targets := []struct{ name, server string }{{"node-local", nodelocal.Address.String()}, {"clusterip", cluster.KubeDNSIP()}}
	// Every name cached at both before anything is measured.
	for _, tg := range targets {
		for _, n := range names {
			if r, err := client.dig(ctx, tg.server, n, "A"); err != nil || len(r.Data("A")) == 0 {
				b.Fatalf("%s through %s: %v %v", n, tg.name, r.Data("A"), err)
			}
		}
	}
	qps, p50, p99, tracked := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for round := range 2 {
		order := slices.Clone(targets)
		if round == 1 {
			slices.Reverse(order)
		}
		for _, tg := range order {
			full := client.dnsperf(b, tg.server, queries, "-l", "10", "-c", "4")
			qps[tg.name] = append(qps[tg.name], dnsperfQPS(b, full))
			lat := dnsperfLatencies(client.dnsperf(b, tg.server, queries, "-l", "5", "-Q", "1000", "-v"))
			if len(lat) < 4000 {
				b.Fatalf("%s: %d latencies from dnsperf -v", tg.name, len(lat))
			}
			p50[tg.name] = append(p50[tg.name], lat[len(lat)/2])
			p99[tg.name] = append(p99[tg.name], lat[len(lat)*99/100])
			before := conntrackTo(b, tg.server)
			for i := range 300 {
				if _, err := client.dig(ctx, tg.server, names[i%len(names)], "A", "+time=1", "+tries=1"); err != nil {
					b.Fatalf("dig through %s: %v", tg.name, err)
				}
			}
			tracked[tg.name] = append(tracked[tg.name], float64(conntrackTo(b, tg.server)-before))
		}
	}
	results := map[string]any{"rounds": 2, "dig_queries": 300}
	for _, tg := range targets {
		results[tg.name] = map[string]float64{"qps": median(qps[tg.name]), "p50_us": median(p50[tg.name]) * 1e6,
			"p99_us": median(p99[tg.name]) * 1e6, "conntrack_entries": median(tracked[tg.name])}
	}
	harness.RecordResults(b, "node-local-dns", results)
	for _, tg := range targets {
		b.ReportMetric(median(qps[tg.name]), tg.name+"-qps")
		b.ReportMetric(median(p50[tg.name])*1e6, tg.name+"-p50-us")
		b.ReportMetric(median(p99[tg.name])*1e6, tg.name+"-p99-us")
		b.ReportMetric(median(tracked[tg.name]), tg.name+"-conntrack-per-300")
	}
	b.Logf("node-local vs ClusterIP: %.2fx the QPS, p99 %.0f vs %.0f µs, conntrack entries per 300 one-shot queries %.0f vs %.0f",
		median(qps["node-local"])/median(qps["clusterip"]), median(p99["node-local"])*1e6, median(p99["clusterip"])*1e6,
		median(tracked["node-local"]), median(tracked["clusterip"]))
}

// dnsperf runs dnsperf in the pod's network namespace and returns its output.
func (p podNetns) dnsperf(b *testing.B, server, queries string, args ...string) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argv := append([]string{"-t", strconv.Itoa(p.pid), "-n", "dnsperf", "-s", server, "-d", queries, "-t", "1"}, args...)
	out, err := exec.CommandContext(ctx, "nsenter", argv...).CombinedOutput()
	if err != nil {
		b.Fatalf("dnsperf %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func dnsperfQPS(b *testing.B, out string) float64 {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Queries per second:"); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	b.Fatalf("no queries per second in dnsperf's output:\n%s", out)
	return 0
}

// dnsperfLatencies are the per-query latencies (seconds, sorted) that
// dnsperf -v prints, one "> RCODE NAME TYPE SECONDS" line per answer.
func dnsperfLatencies(out string) []float64 {
	var lat []float64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && f[0] == ">" && f[1] == "NOERROR" {
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				lat = append(lat, v)
			}
		}
	}
	slices.Sort(lat)
	return lat
}

// conntrackTo counts the UDP entries in master-1's conntrack table whose
// original destination is server.
func conntrackTo(b *testing.B, server string) int {
	out, err := kc.Master().NetCommand(context.Background(), "conntrack", "-L", "-p", "udp", "--orig-dst", server).Output()
	if err != nil {
		b.Fatalf("conntrack -L: %v", err)
	}
	return strings.Count(string(out), "\n")
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s) == 0 {
		return 0
	}
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}
