package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// ResultsEnv names the directory benchmarks write their numbers to, as JSON
// files that hack/benchreport turns into bench/results.md and the chart.
const ResultsEnv = "YURTDNS_BENCH_OUT"

// record writes v as name.json into $YURTDNS_BENCH_OUT, when set.
func record(b testing.TB, name string, v any) {
	b.Helper()
	dir := os.Getenv(ResultsEnv)
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644); err != nil {
		b.Fatal(err)
	}
}

// sample keeps at most n evenly spaced values of a sorted slice, for charts.
func sample(sorted []float64, n int) []float64 {
	if len(sorted) <= n {
		return sorted
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = sorted[i*(len(sorted)-1)/(n-1)]
	}
	return out
}
