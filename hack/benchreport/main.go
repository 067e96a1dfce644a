// Command benchreport turns the JSON the benchmarks write (make bench) into
// bench/results.md and bench/latency.svg.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	in := flag.String("in", "bin/bench-data", "directory of the benchmarks' JSON files")
	out := flag.String("out", "bench", "directory for results.md and latency.svg")
	runID := flag.String("run", "", "the make bench run every result must come from")
	flag.Parse()
	if *runID == "" {
		fmt.Fprintln(os.Stderr, "benchreport: -run is required (make bench sets it)")
		os.Exit(2)
	}
	if err := run(*in, *out, *runID); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

type dnsperf struct {
	Records   int                  `json:"records"`
	Rounds    int                  `json:"rounds"`
	RoundSecs float64              `json:"round_seconds"`
	Rate      int                  `json:"latency_rate"`
	QPS       map[string][]float64 `json:"qps"`
	CPU       map[string][]float64 `json:"cpu_us_per_query"`
	P50       map[string][]float64 `json:"p50_us"`
	P99       map[string][]float64 `json:"p99_us"`
	LatencyUS map[string][]float64 `json:"latency_us_sample"`
}

type propagation struct {
	Changes   int       `json:"changes"`
	Yurthosts []float64 `json:"yurthosts_ms"`
	HostsFile []float64 `json:"hostsfile_ms"`
}

// nodeLocal is BenchmarkNodeLocalDNS's (test/realcluster) result.
type nodeLocal struct {
	Rounds    int          `json:"rounds"`
	Digs      int          `json:"dig_queries"`
	NodeLocal dnsTargetRun `json:"node-local"`
	ClusterIP dnsTargetRun `json:"clusterip"`
}

// edgeReboot is test/realcluster's BenchmarkEdgeReboot: the layout users
// run today against NodeLocal DNS, through one reboot while cut off each.
type edgeReboot struct {
	Cut            float64          `json:"cut_seconds"`
	Stock          edgeRebootLayout `json:"stock"`
	NodeLocal      edgeRebootLayout `json:"node-local"`
	StaleEndpoints []string         `json:"stock_yurthub_kube_dns_endpoints"`
	CoreDNSNow     string           `json:"stock_coredns_worker_1_ip"`
}

type edgeRebootLayout struct {
	PodBack      float64 `json:"pod_back_s"`
	DNSAnswering float64 `json:"dns_answering_s"`
	Queries      int     `json:"queries"`
	Failed       int     `json:"failed"`
	Healthy      float64 `json:"yurthub_healthy_s"`
	RealToken    float64 `json:"real_token_s"`
	TokenSeen    bool    `json:"real_token_seen"`
	Answered     float64 `json:"change_answered_s"`
}

// token is when the cache's token was real again, or that it never was
// while the run waited.
func (l edgeRebootLayout) token() string {
	if !l.TokenSeen {
		return "never seen"
	}
	return fmt.Sprintf("%.1f s", l.RealToken)
}

type dnsTargetRun struct {
	QPS       float64 `json:"qps"`
	P50       float64 `json:"p50_us"`
	P99       float64 `json:"p99_us"`
	Conntrack float64 `json:"conntrack_entries"`
}

// fleetSync is one sync's figures in BenchmarkFleet100k.
type fleetSync struct {
	GOMEMLIMIT   string  `json:"gomemlimit"`
	WrittenMS    float64 `json:"written_ms"`
	Shards       float64 `json:"shards"`
	StartRSS     float64 `json:"start_rss_mib"`
	StartPeakRSS float64 `json:"start_peak_rss_mib"`
	StartHeap    float64 `json:"start_heap_mib"`
	RSS          float64 `json:"rss_mib"`
	PeakRSS      float64 `json:"peak_rss_mib"`
	Heap         float64 `json:"heap_mib"`
	ChurnWrites  float64 `json:"churn_shard_writes"`
	AnswerP50    float64 `json:"answer_p50_ms"`
	AnswerP99    float64 `json:"answer_p99_ms"`
}

// fleet100k is BenchmarkFleet100k's result.
type fleet100k struct {
	Nodes          float64    `json:"nodes"`
	NodeJSONBytes  float64    `json:"node_json_bytes"`
	BaselineCommit string     `json:"baseline_commit"`
	Churn          int        `json:"churn_changes"`
	Baseline       fleetSync  `json:"baseline"`
	Today          fleetSync  `json:"today"`
	TodayQPS100MS  float64    `json:"today_qps_100_written_ms"`
	CoreDNSReady   float64    `json:"coredns_ready_ms"`
	CoreDNSEmpty   float64    `json:"coredns_empty_ready_ms"`
	CoreDNSRSSOver float64    `json:"coredns_rss_over_empty_mib"`
	StatusChurn    fleetChurn `json:"churn"`
}

// fleetChurn is today's sync under the kubelets' status churn in
// BenchmarkFleet100k, beside a bare informer.
type fleetChurn struct {
	Rate              float64 `json:"status_updates_per_s"`
	Window            float64 `json:"window_s"`
	Updates           float64 `json:"updates"`
	SyncCPU           float64 `json:"sync_cpu_us_per_update"`
	InformerCPU       float64 `json:"informer_cpu_us_per_update"`
	CPURatio          float64 `json:"cpu_ratio"`
	WindowShardWrites float64 `json:"window_shard_writes"`
	Changes           float64 `json:"changes"`
	AnswerP50         float64 `json:"answer_p50_ms"`
	AnswerP99         float64 `json:"answer_p99_ms"`
	ChangeShardWrites float64 `json:"change_shard_writes"`
	ChangeSync        float64 `json:"change_sync_ms"`
	FullSync          float64 `json:"full_sync_ms"`
	Burst             float64 `json:"burst"`
	BurstWritten      float64 `json:"burst_written_ms"`
	BurstAnswered     float64 `json:"burst_answered_ms"`
	BurstShards       float64 `json:"burst_shards"`
	BurstShardWrites  float64 `json:"burst_shard_writes"`
	PeakRSS           float64 `json:"peak_rss_mib"`
	GOMEMLIMIT        string  `json:"gomemlimit"`
}

// load reads name's result into v; it must come from run.
func load(dir, name, run string, v any) error {
	data, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		return fmt.Errorf("%s: %w (run make bench)", name, err)
	}
	file := struct {
		Run    string          `json:"run"`
		Result json.RawMessage `json:"result"`
	}{}
	if err := json.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if file.Run != run {
		return fmt.Errorf("%s comes from run %q, not %q: results.md is written from one make bench run only", name, file.Run, run)
	}
	return json.Unmarshal(file.Result, v)
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}

func quantile(v []float64, q float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[int(float64(len(s)-1)*q)]
}

func run(in, out, runID string) error {
	var d dnsperf
	var p propagation
	var scale, conv10, conv30, change, churn, fleet map[string]float64
	var f100k fleet100k
	var local nodeLocal
	var reboot edgeReboot
	for name, v := range map[string]any{"dnsperf": &d, "propagation": &p, "scale": &scale,
		"sync-convergence-10000": &conv10, "sync-convergence-30000": &conv30, "sync-change": &change, "sync-churn": &churn,
		"fleet-change": &fleet, "fleet-100k": &f100k, "node-local-dns": &local, "edge-reboot": &reboot} {
		if err := load(in, name, runID, v); err != nil {
			return err
		}
	}
	plugins := []string{"yurthosts", "hosts", "whoami"}
	var b strings.Builder
	fmt.Fprintf(&b, "# yurtdns benchmark results\n\nWritten whole by one `make bench` run, **%s** (commit and start time; every row below comes from it, as its last column says) (2 shared vCPUs; DNS server pinned to CPU 0, dnsperf to CPU 1; all three plugins in one coredns-yurt process, %d records, %d interleaved rounds of %.0f s). Chart: [latency.svg](latency.svg).\n\n",
		runID, d.Records, d.Rounds, d.RoundSecs)
	b.WriteString("| plugin | QPS (median) | server CPU µs/query (median) | p50 µs at fixed rate | p99 µs (median round) |\n|---|---|---|---|---|\n")
	for _, pl := range plugins {
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.0f | %.0f |\n", pl, median(d.QPS[pl]), median(d.CPU[pl]), median(d.P50[pl]), median(d.P99[pl]))
	}
	y, h, w := median(d.CPU["yurthosts"]), median(d.CPU["hosts"]), median(d.CPU["whoami"])
	fmt.Fprintf(&b, "\nRatios: QPS yurthosts/whoami %.3f, yurthosts/hosts %.3f; capacity from CPU per query yurthosts/whoami %.3f, yurthosts/hosts %.3f (targets ≥ 0.97 and ≥ 1.0). Latency at a fixed %d qps.\n\n",
		median(d.QPS["yurthosts"])/median(d.QPS["whoami"]), median(d.QPS["yurthosts"])/median(d.QPS["hosts"]), w/y, h/y, d.Rate)
	b.WriteString("| measured | result | target | reproduce | run |\n|---|---|---|---|---|\n")
	// row writes a row of the table, with the run it came from.
	row := func(format string, args ...any) {
		b.WriteString(strings.TrimSuffix(fmt.Sprintf(format, args...), "\n") + " " + runID + " |\n")
	}
	row("| ConfigMap write → answer (%d changes) | yurthosts p50 %.1f ms, p99 %.1f ms; hosts file `reload 300ms` p50 %.0f ms, p99 %.0f ms | p99 ≤ 50 ms | `go test -run '^$' -bench Propagation -benchtime 1x ./test/bench` |\n",
		p.Changes, quantile(p.Yurthosts, 0.5), quantile(p.Yurthosts, 0.99), quantile(p.HostsFile, 0.5), quantile(p.HostsFile, 0.99))
	row("| %.0f records (%.0f bytes) | start → ready %.0f ms (empty %.0f ms); RSS +%.1f MiB over empty | ≤ 1 s; ≤ 32 MiB | `-bench Scale35k` |\n",
		scale["records"], scale["bytes"], scale["ready_ms"], scale["empty_ready_ms"], scale["rss_over_empty_mib"])
	row("| sync start → records written | 10k nodes %.0f ms, 30k nodes %.0f ms | ≤ 2 s for 10k | `-bench SyncConvergence` |\n", conv10["written_ms"], conv30["written_ms"])
	row("| sync memory | 10k nodes RSS %.0f MiB (heap in use %.0f MiB); 30k nodes RSS %.0f MiB (heap in use %.0f MiB) | | `-bench SyncConvergence` |\n",
		conv10["rss_mib"], conv10["heap_inuse_mib"], conv30["rss_mib"], conv30["heap_inuse_mib"])
	row("| one node change → ConfigMap (%.0f changes, debounce 50 ms) | p50 %.0f ms, p99 %.0f ms | p99 ≤ 100 ms | `-bench SyncNodeChange` |\n", change["changes"], change["p50_ms"], change["p99_ms"])
	row("| churn | %.0f node changes in %.1f s → %.0f ConfigMap writes (%.1f per second of churn) | ≤ 25 for 1000 in 1 s | `-bench SyncChurn` |\n",
		churn["changes"], churn["burst_ms"]/1000, churn["writes"], churn["writes"]/(churn["burst_ms"]/1000))
	row("| one node change at %.0f nodes (%.0f shards), bytes the apiserver sends each watcher (%.0f real watches per layout, %.0f changes, same run) | single ConfigMap %.0f B, shards %.0f B: **%.2f%%**; at 5,000 watchers (linear) %.0f MB vs %.2f MB per change | ≤ 1%% | `-bench FleetChange` |\n",
		fleet["nodes"], fleet["shards"], fleet["watchers"], fleet["changes"], fleet["bytes_per_watcher_single"], fleet["bytes_per_watcher_shards"],
		fleet["percent"], fleet["mb_per_change_5000_single"], fleet["mb_per_change_5000_shards"])
	row("| node change → answer at %.0f nodes | shards p50 %.0f ms, p99 %.0f ms; single ConfigMap p50 %.0f ms, p99 %.0f ms (sync writes per change: %.2f shards, %.2f single) | p99 ≤ 100 ms | `-bench FleetChange` |\n",
		fleet["nodes"], fleet["p50_ms_shards"], fleet["p99_ms_shards"], fleet["p50_ms_single"], fleet["p99_ms_single"],
		fleet["shard_writes_per_change"], fleet["single_writes_per_change"])
	bs, ts := f100k.Baseline, f100k.Today
	row("| %.0f kubelet-sized nodes (%.0f B of JSON each: worker-1's Node, 50 images), the sync of %s (before) vs today's, same run, each with its deployed GOMEMLIMIT (%s vs %s) | start → all %.0f shards written **%.1f s vs %.1f s** (today's at the old `--kube-api-qps 100`: %.1f s); peak RSS through start **%.0f vs %.0f MiB** (RSS %.0f vs %.0f, Go heap in use %.0f vs %.0f MiB); after %d changes at 20/s peak RSS **%.0f vs %.0f MiB** (RSS %.0f vs %.0f, heap %.0f vs %.0f MiB, %.0f vs %.0f shard writes); change → answer p50 %.0f vs %.0f ms, p99 %.0f vs %.0f ms | today: peak RSS ≤ 128 MiB, written ≤ 30 s | `-bench Fleet100k` |\n",
		f100k.Nodes, f100k.NodeJSONBytes, f100k.BaselineCommit, bs.GOMEMLIMIT, ts.GOMEMLIMIT, ts.Shards, bs.WrittenMS/1000, ts.WrittenMS/1000, f100k.TodayQPS100MS/1000,
		bs.StartPeakRSS, ts.StartPeakRSS, bs.StartRSS, ts.StartRSS, bs.StartHeap, ts.StartHeap, f100k.Churn, bs.PeakRSS, ts.PeakRSS, bs.RSS, ts.RSS,
		bs.Heap, ts.Heap, bs.ChurnWrites, ts.ChurnWrites, bs.AnswerP50, ts.AnswerP50, bs.AnswerP99, ts.AnswerP99)
	fc := f100k.StatusChurn
	row("| today's sync at %.0f kubelet-sized nodes under their status churn (%.0f updates/s achieved of 333 asked, %.0f s), beside a bare client-go informer of the same Nodes, same run | CPU per status update **%.0f vs %.0f µs (%.2fx)**, %.0f shard writes for them; %.0f changes one at a time: change → answer (coredns-yurt) p50 %.0f ms, **p99 %.0f ms**, %.0f shard writes, %.1f ms of sync per change (a full sync %.0f ms); %.0f changes at once (%.0f shards): API took them in %.1f s, **all answered in %.1f s**, %.0f shard writes; peak RSS %.0f MiB (GOMEMLIMIT %s) | ≤ 1.5x; p99 ≤ 100 ms; writes = changes; burst ≤ 5 s; RSS ≤ 128 MiB | `-bench Fleet100k` |\n",
		f100k.Nodes, fc.Rate, fc.Window, fc.SyncCPU, fc.InformerCPU, fc.CPURatio, fc.WindowShardWrites, fc.Changes, fc.AnswerP50, fc.AnswerP99, fc.ChangeShardWrites, fc.ChangeSync, fc.FullSync,
		fc.Burst, fc.BurstShards, fc.BurstWritten/1000, fc.BurstAnswered/1000, fc.BurstShardWrites, fc.PeakRSS, fc.GOMEMLIMIT)
	row("| coredns-yurt at %.0f nodes (the shards) | start → ready %.0f ms (empty %.0f ms), RSS +%.1f MiB over empty | ready ≤ 2 s; ≤ 64 MiB | `-bench Fleet100k` |\n",
		f100k.Nodes, f100k.CoreDNSReady, f100k.CoreDNSEmpty, f100k.CoreDNSRSSOver)
	nl, ci := local.NodeLocal, local.ClusterIP
	row("| a pod on the real cluster's master-1 asks the node-local cache (169.254.20.10) vs the kube-dns ClusterIP (DNAT), same run, median of %d alternating rounds | QPS (dnsperf -c 4) **%.0f vs %.0f (%.2fx)**; at 1,000 QPS p50 %.0f vs %.0f µs, p99 %.0f vs %.0f µs; conntrack entries left by %d one-shot `dig`s **%.0f vs %.0f** | | `go test -run '^$' -bench NodeLocalDNS -benchtime 1x ./test/realcluster` (root) |\n",
		local.Rounds, nl.QPS, ci.QPS, nl.QPS/ci.QPS, nl.P50, ci.P50, nl.P99, ci.P99, local.Digs, nl.Conntrack, ci.Conntrack)
	st, nr := reboot.Stock, reboot.NodeLocal
	row("| worker-1 (behind yurthub v1.7.0) cut off from master-1 for %.0f s and rebooted as the cut began; from a pod on it, every 200 ms, one try, 1 s timeout: the node names and the ClusterIP Services that existed before | today's layout (kube-dns, coredns-yurt per node): **%d of %d failed**, the pod back %.1f s after the reboot; yurthub's cached kube-dns EndpointSlice %v while worker-1's CoreDNS pod was at %s; a Node made during the cut answered %.1f s after the link came back. NodeLocal DNS: **%d of %d failed**, the pod back %.1f s and its DNS answering %.1f s after the reboot; link back → yurthub proxying %.1f s, the cache's token a real one %s, the change answered %.1f s | NodeLocal: 0 failed; answered ≤ 5 s after yurthub | `go test -run '^$' -bench EdgeReboot -benchtime 1x ./test/realcluster` (root) |\n",
		reboot.Cut, st.Failed, st.Queries, st.PodBack, reboot.StaleEndpoints, reboot.CoreDNSNow, st.Answered,
		nr.Failed, nr.Queries, nr.PodBack, nr.DNSAnswering, nr.Healthy, nr.token(), nr.Answered)
	b.WriteString("\nAll rows: `make bench` runs them together (about 85 minutes here: 18 for test/bench, 65 for the real cluster); each `-bench` above runs one, from the repository root, after `make test-tools`.\n")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	svg := chart(
		panel{title: fmt.Sprintf("DNS answer latency at %d qps (µs, log scale)", d.Rate), log: true,
			series: []series{{"yurthosts", d.LatencyUS["yurthosts"]}, {"hosts", d.LatencyUS["hosts"]}, {"whoami", d.LatencyUS["whoami"]}}},
		panel{title: "change → answer (ms, log scale)", log: true,
			series: []series{{"yurthosts (API watch)", p.Yurthosts}, {"hosts file, reload 300ms", p.HostsFile}}},
	)
	return os.WriteFile(filepath.Join(out, "latency.svg"), []byte(svg), 0o644)
}
