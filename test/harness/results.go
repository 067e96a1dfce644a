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

// RunEnv names the run the results come from (make bench sets it to the
// commit and start time); hack/benchreport refuses results of mixed runs.
const RunEnv = "YURTDNS_BENCH_RUN"

// Results is the JSON of one benchmark's numbers.
type Results struct {
	// Run is $YURTDNS_BENCH_RUN, or "" outside make bench.
	Run    string `json:"run"`
	Result any    `json:"result"`
}

// RecordResults writes v, with the run, as name.json into
// $YURTDNS_BENCH_OUT, when set.
func RecordResults(b testing.TB, name string, v any) {
	b.Helper()
	dir := os.Getenv(ResultsEnv)
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	data, err := json.MarshalIndent(Results{Run: os.Getenv(RunEnv), Result: v}, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644); err != nil {
		b.Fatal(err)
	}
}
