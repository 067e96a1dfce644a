package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// ResultsEnv names the directory benchmarks write their numbers to, as JSON
// files that hack/benchreport turns into bench/results.md and the chart.
const ResultsEnv = "YURTDNS_BENCH_OUT"

// RecordResults writes v as name.json into $YURTDNS_BENCH_OUT, when set.
func RecordResults(b testing.TB, name string, v any) {
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
