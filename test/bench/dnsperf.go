// Package bench measures yurtdns the way operators would: dnsperf against
// the real coredns-yurt binary, and propagation from an API write to an
// answer, on the real control plane. Run with `make bench`.
package bench

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// loadCPU is where dnsperf runs; servers are pinned to serverCPU.
const (
	serverCPU = "0"
	loadCPU   = "1"
)

var qpsRE = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
var lostRE = regexp.MustCompile(`Queries lost:\s+(\d+)`)
var completedRE = regexp.MustCompile(`Queries completed:\s+(\d+)`)

// loadResult is one full-speed dnsperf run.
type loadResult struct {
	qps       float64
	completed int
	// serverCPU is the CPU time the server process used during the run.
	serverCPU time.Duration
}

// cpuPerQuery is the server's CPU time per answered query: unlike QPS it is
// barely moved by other load on a shared machine.
func (r loadResult) cpuPerQuery() time.Duration {
	return r.serverCPU / time.Duration(max(r.completed, 1))
}

// maxQPS runs dnsperf at full speed for d against the server process pid.
func maxQPS(b testing.TB, pid, port int, queries string, d time.Duration) loadResult {
	b.Helper()
	cpuBefore := processCPU(b, pid)
	out := dnsperf(b, "-s", "127.0.0.1", "-p", strconv.Itoa(port), "-d", queries,
		"-l", strconv.Itoa(int(d.Seconds())), "-c", "4", "-q", "200")
	cpu := processCPU(b, pid) - cpuBefore
	m := qpsRE.FindStringSubmatch(out)
	if m == nil {
		b.Fatalf("no QPS in dnsperf output:\n%s", out)
	}
	if l := lostRE.FindStringSubmatch(out); l != nil && l[1] != "0" {
		b.Logf("dnsperf lost %s queries on port %d", l[1], port)
	}
	qps, _ := strconv.ParseFloat(m[1], 64)
	completed := 0
	if c := completedRE.FindStringSubmatch(out); c != nil {
		completed, _ = strconv.Atoi(c[1])
	}
	return loadResult{qps: qps, completed: completed, serverCPU: cpu}
}

// processCPU is the user+system CPU time of pid so far.
func processCPU(b testing.TB, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command: state is field 3, utime 14, stime 15.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	fields := strings.Fields(rest)
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// latencies runs dnsperf at a fixed rate and returns each answer's latency, sorted.
func latencies(b testing.TB, port int, queries string, rate int, d time.Duration) []time.Duration {
	b.Helper()
	out := dnsperf(b, "-s", "127.0.0.1", "-p", strconv.Itoa(port), "-d", queries,
		"-l", strconv.Itoa(int(d.Seconds())), "-Q", strconv.Itoa(rate), "-v")
	var lat []time.Duration
	for _, line := range strings.Split(out, "\n") {
		// "> NOERROR worker-1 A 0.000187"
		if !strings.HasPrefix(line, "> ") {
			continue
		}
		fields := strings.Fields(line)
		if fields[1] != "NOERROR" {
			b.Fatalf("dnsperf got an error answer: %s", line)
		}
		s, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			b.Fatalf("bad latency line %q", line)
		}
		lat = append(lat, time.Duration(s*float64(time.Second)))
	}
	if len(lat) == 0 {
		b.Fatalf("no answers in dnsperf output:\n%s", out)
	}
	slices.Sort(lat)
	return lat
}

func dnsperf(b testing.TB, args ...string) string {
	b.Helper()
	cmd := exec.Command("taskset", append([]string{"-c", loadCPU, "dnsperf"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("dnsperf %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// percentile of sorted durations, p in [0,1].
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}
