package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"
)

// The two checks every test here makes: a DNS answer, and the records text
// the sync writes, each expected within a budget the test names.

// expectAnswer polls dig at server until name/qtype answers exactly want
// (sorted addresses, or the rcode when want is "NXDOMAIN"/"NODATA"), for at
// most within, timed from now.
func expectAnswer(t harness.TB, within time.Duration, server, name, qtype string, want ...string) {
	t.Helper()
	start := time.Now()
	harness.Eventually(t, within, func() error {
		r, err := harness.DigErr(server, name, qtype)
		if err != nil {
			return err
		}
		if err := matchAnswer(r, qtype, want); err != nil {
			return fmt.Errorf("%s %s: %v", name, qtype, err)
		}
		return nil
	})
	t.Logf("%s %s → %v in %s", name, qtype, want, time.Since(start).Round(time.Millisecond))
}

func matchAnswer(r harness.DigResult, qtype string, want []string) error {
	if err := matchAnswerData(r, qtype, want); err != nil {
		// dig's header says which server answered (its flags, the counts
		// of every section): a stray answer names the one that sent it.
		return fmt.Errorf("%w; dig printed:\n%s", err, r.Raw)
	}
	return nil
}

func matchAnswerData(r harness.DigResult, qtype string, want []string) error {
	switch {
	case len(want) == 1 && want[0] == "NXDOMAIN":
		if r.Status != "NXDOMAIN" {
			return fmt.Errorf("want NXDOMAIN, got %s %v", r.Status, r.Answers)
		}
	case len(want) == 1 && want[0] == "NODATA":
		if r.Status != "NOERROR" || len(r.Answers) != 0 {
			return fmt.Errorf("want NOERROR with no answer, got %s %v", r.Status, r.Answers)
		}
	default:
		sorted := slices.Sorted(slices.Values(want))
		if r.Status != "NOERROR" || !slices.Equal(r.Data(qtype), sorted) {
			return fmt.Errorf("want %v, got %s %v", sorted, r.Status, r.Answers)
		}
	}
	return nil
}

// expectRecords waits, for at most within, for the exact records text (the
// lines joined) in the yurt-tunnel records ConfigMap.
func expectRecords(t harness.TB, within time.Duration, cp *harness.ControlPlane, lines ...string) {
	t.Helper()
	expectRecordsIn(t, within, cp, tunnelnodes.ConfigMapName, lines...)
}

// expectRecordsIn is expectRecords for the records ConfigMap named configMap.
func expectRecordsIn(t harness.TB, within time.Duration, cp *harness.ControlPlane, configMap string, lines ...string) {
	t.Helper()
	want := strings.Join(lines, "\n")
	harness.Eventually(t, within, func() error {
		if got := records(t, cp, configMap); got != want {
			return fmt.Errorf("records of %s:\n%s\nwant:\n%s", configMap, got, want)
		}
		return nil
	})
}
