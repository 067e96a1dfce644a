package bench

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"
)

const yurthostsOnly = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
    }
}
`

// BenchmarkScale35k: a records ConfigMap as large as the API allows (35k
// nodes in the upstream format, about 1 MiB): time from process start to
// /ready, and resident memory over the same server with no records.
func BenchmarkScale35k(b *testing.B) {
	cp := harness.Start(b, harness.Options{})
	cp.CreateService(b, harness.TunnelService(tunnelIP))
	harness.Binary(b, "coredns-yurt") // built before the clock starts

	measure := func(text string) (ready time.Duration, rssKiB int) {
		cp.ApplyConfigMap(b, recordsConfigMap(text))
		start := time.Now()
		srv := harness.StartCoreDNS(b, cp.Kubeconfig, yurthostsOnly, harness.CoreDNSOptions{CPUs: serverCPU})
		ready = time.Since(start)
		time.Sleep(2 * time.Second) // let the first GC cycles run
		rssKiB = vmRSS(b, srv.Pid())
		srv.Stop()
		return ready, rssKiB
	}
	text, names := records(35000)
	if len(text) > tunnelnodes.MaxHostsBytes {
		b.Fatalf("35k records are %d bytes, over the ConfigMap limit", len(text))
	}
	emptyReady, emptyRSS := measure("")
	fullReady, fullRSS := measure(text)
	b.ReportMetric(float64(fullReady.Milliseconds()), "ms-start-to-ready-35k")
	b.ReportMetric(float64(emptyReady.Milliseconds()), "ms-start-to-ready-empty")
	b.ReportMetric(float64(fullRSS-emptyRSS)/1024, "MiB-rss-over-empty")
	harness.RecordResults(b, "scale", map[string]any{"records": len(names), "bytes": len(text), "ready_ms": fullReady.Milliseconds(),
		"empty_ready_ms": emptyReady.Milliseconds(), "rss_over_empty_mib": float64(fullRSS-emptyRSS) / 1024})
	b.Logf("%d records (%d bytes): ready in %s (empty: %s); RSS %d KiB vs %d KiB empty: +%.1f MiB",
		len(names), len(text), fullReady, emptyReady, fullRSS, emptyRSS, float64(fullRSS-emptyRSS)/1024)
}

// vmRSS is the process's resident memory, in KiB.
func vmRSS(b testing.TB, pid int) int { return procStatusKiB(b, pid, "VmRSS") }

// vmHWM is the process's peak resident memory so far, in KiB.
func vmHWM(b testing.TB, pid int) int { return procStatusKiB(b, pid, "VmHWM") }

// procStatusKiB reads field (in kB) of the process's /proc status.
func procStatusKiB(b testing.TB, pid int, field string) int {
	b.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kib
		}
	}
	b.Fatalf("no %s for pid %d", field, pid)
	return 0
}
