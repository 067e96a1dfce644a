package realcluster

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkInstallRevertCycles: the install and revert of TestInstallAndRevert
// (install --control-plane-jobs, then revert) over and over — 10 cycles,
// YURTDNS_CYCLES to change it — with the single-try, 1 s DNS probe asking
// kube-dns from both nodes every 100 ms all along. "Zero failed queries"
// means something only over this many queries.
func BenchmarkInstallRevertCycles(b *testing.B) {
	cycles := 10
	if v, err := strconv.Atoi(os.Getenv("YURTDNS_CYCLES")); err == nil && v > 0 {
		cycles = v
	}
	createTunnelService(b)
	defer deleteTunnelService(b)
	probe := startDNSProbe(kc.Nodes)
	started := time.Now()
	for i := range cycles {
		for _, args := range [][]string{{"install", "--control-plane-jobs"}, {"revert"}} {
			if out, err := runSync(b, args...); err != nil {
				probe.finish(b, "install/revert cycles")
				b.Fatalf("cycle %d, %s: %v\n%s", i+1, args[0], err, out)
			}
		}
	}
	probe.finish(b, strconv.Itoa(cycles)+" install/revert cycles")
	b.Logf("%d cycles in %s", cycles, time.Since(started).Round(time.Second))
	b.ReportMetric(float64(probe.total), "queries")
	b.ReportMetric(float64(len(probe.failures)), "failed")
}
