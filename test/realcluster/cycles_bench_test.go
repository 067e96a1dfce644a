package realcluster

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkInstallRevertCycles: install and revert over and over with the
// single-try, 1 s DNS probe asking kube-dns from both nodes every probeEvery
// all along (UDP and TCP in turn), until at least 10 cycles and 20,000
// queries (YURTDNS_CYCLES sets the least number of cycles): "zero failed
// queries" means something only over that many. What each cycle repeats
// is what moves DNS: the hand-off from the coredns Deployment to the
// DaemonSet and back. The control-plane step, whose restarts DNS rides
// through on its cache, is left out (--skip control-plane): it would make
// a cycle 2.5 minutes instead of 40 s; TestInstallAndRevert probes it.
func BenchmarkInstallRevertCycles(b *testing.B) {
	const minQueries, maxCycles = 20000, 100
	minCycles := 10
	if v, err := strconv.Atoi(os.Getenv("YURTDNS_CYCLES")); err == nil && v > 0 {
		minCycles = v
	}
	probe := startDNSProbe(kc.Nodes)
	started := time.Now()
	cycles := 0
	for ; cycles < maxCycles && (cycles < minCycles || probe.asked() < minQueries); cycles++ {
		for _, args := range [][]string{{"install", "--skip", "control-plane"}, {"revert"}} {
			if out, err := runSync(b, args...); err != nil {
				probe.finish(b, "install/revert cycles")
				b.Fatalf("cycle %d, %s: %v\n%s", cycles+1, args[0], err, out)
			}
		}
	}
	probe.finish(b, strconv.Itoa(cycles)+" install/revert cycles")
	b.Logf("%d cycles in %s", cycles, time.Since(started).Round(time.Second))
	b.ReportMetric(float64(cycles), "cycles")
	b.ReportMetric(float64(probe.total), "queries")
	b.ReportMetric(float64(len(probe.failures)), "failed")
}
