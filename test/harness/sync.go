package harness

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// Sync is a running tunnel-nodes-sync binary.
type Sync struct {
	*Process
	MetricsURL, HealthzURL, ReadyzURL string
}

// StartSync runs `tunnel-nodes-sync run` against the kubeconfig with
// loopback metrics and probe ports, followed by args, and waits for /readyz.
func StartSync(t TB, kubeconfig string, args ...string) *Sync {
	t.Helper()
	return StartSyncBinary(t, Binary(t, "tunnel-nodes-sync"), 30*time.Second, kubeconfig, args...)
}

// StartSyncBinary is StartSync of the binary at path, waiting up to
// ready for /readyz.
func StartSyncBinary(t TB, path string, ready time.Duration, kubeconfig string, args ...string) *Sync {
	t.Helper()
	metrics := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	probes := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	all := append([]string{"run", "--kubeconfig", kubeconfig, "--metrics-bind-address", metrics,
		"--health-probe-bind-address", probes}, args...)
	s := &Sync{
		Process:    StartProcess(t, path, all...),
		MetricsURL: "http://" + metrics + "/metrics",
		HealthzURL: "http://" + probes + "/healthz",
		ReadyzURL:  "http://" + probes + "/readyz",
	}
	s.WaitHTTP200(t, s.ReadyzURL, ready)
	return s
}

// WaitMetric reads sample until ok holds, for up to 5 s, and returns the
// last value and whether it held: a process counts a write once the write
// returned, which can be after a watcher of the object saw it.
func WaitMetric(t TB, url, sample string, ok func(float64) bool) (float64, bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v := Metric(t, url, sample)
		if ok(v) || time.Now().After(deadline) {
			return v, ok(v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Metric reads one sample (name with its labels, exactly as exposed) from a
// Prometheus endpoint; absent samples read as -1.
func Metric(t TB, url, sample string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` ([0-9.e+-]+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("sample %s: %v", sample, err)
	}
	return v
}
