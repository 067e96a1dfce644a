package harness

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// DNSPerf is a dnsperf run in the background: steady load on a server while
// a test injects a fault.
type DNSPerf struct {
	cmd  *exec.Cmd
	out  strings.Builder
	done chan error
}

// DNSPerfResult is dnsperf's own summary of a run.
type DNSPerfResult struct {
	Sent, Completed, Lost int
	// RCodes counts answers by response code ("NOERROR": 1200).
	RCodes map[string]int
	Raw    string
}

// Failed is the number of queries that got no answer or an error answer.
func (r DNSPerfResult) Failed() int { return r.Lost + r.Completed - r.RCodes["NOERROR"] }

// WriteQueries writes a dnsperf data file asking qtype for each name.
func WriteQueries(t TB, names []string, qtype string) string {
	t.Helper()
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s\n", n, qtype)
	}
	path := filepath.Join(t.TempDir(), "queries")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartDNSPerf sends qps queries per second from the queries file to server
// ("127.0.0.1:PORT") over UDP for d. A query unanswered after 5 s (a
// resolver's usual timeout) is lost.
func StartDNSPerf(t TB, server, queries string, qps int, d time.Duration) *DNSPerf {
	t.Helper()
	host, port, _ := strings.Cut(server, ":")
	p := &DNSPerf{done: make(chan error, 1)}
	p.cmd = exec.Command("dnsperf", "-s", host, "-p", port, "-d", queries,
		"-l", strconv.Itoa(int(d.Seconds())), "-Q", strconv.Itoa(qps), "-t", "5")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting dnsperf: %v", err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

var (
	dnsperfCountRE = regexp.MustCompile(`Queries (sent|completed|lost):\s+(\d+)`)
	dnsperfRCodeRE = regexp.MustCompile(`([A-Z]+) (\d+) \(`)
)

// Stop interrupts the run (queries in flight then are counted as
// interrupted, not lost), waits for it and parses its summary.
func (p *DNSPerf) Stop(t TB) DNSPerfResult {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	return p.Wait(t)
}

// Wait waits for the run to end and parses its summary.
func (p *DNSPerf) Wait(t TB) DNSPerfResult {
	t.Helper()
	if err := <-p.done; err != nil {
		t.Fatalf("dnsperf: %v\n%s", err, p.out.String())
	}
	r := DNSPerfResult{RCodes: map[string]int{}, Raw: p.out.String()}
	for _, m := range dnsperfCountRE.FindAllStringSubmatch(r.Raw, -1) {
		n, _ := strconv.Atoi(m[2])
		switch m[1] {
		case "sent":
			r.Sent = n
		case "completed":
			r.Completed = n
		case "lost":
			r.Lost = n
		}
	}
	_, codes, _ := strings.Cut(r.Raw, "Response codes:")
	codes, _, _ = strings.Cut(codes, "\n")
	for _, m := range dnsperfRCodeRE.FindAllStringSubmatch(codes, -1) {
		n, _ := strconv.Atoi(m[2])
		r.RCodes[m[1]] = n
	}
	if r.Sent == 0 {
		t.Fatalf("dnsperf sent nothing:\n%s", r.Raw)
	}
	return r
}

// AnswerChecker asks for random names from a known set in a loop and
// checks every answer's content, which dnsperf does not: a wrong address is
// a failure even with NOERROR.
type AnswerChecker struct {
	Checked, Wrong, Failed atomic.Int64

	mu       sync.Mutex
	firstBad string
	stop     chan struct{}
	done     chan struct{}
}

// StartAnswerChecker queries server for the names in want (name → the one
// A record expected) until Stop.
func StartAnswerChecker(server string, want map[string]string) *AnswerChecker {
	c := &AnswerChecker{stop: make(chan struct{}), done: make(chan struct{})}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	client := &dns.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			name := names[rand.IntN(len(names))]
			q := new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA)
			r, _, err := client.Exchange(q, server)
			c.Checked.Add(1)
			switch {
			case err != nil:
				c.Failed.Add(1)
				c.note(fmt.Sprintf("%s: %v", name, err))
			case r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1:
				c.Wrong.Add(1)
				c.note(fmt.Sprintf("%s: %s with %d answers", name, dns.RcodeToString[r.Rcode], len(r.Answer)))
			case r.Answer[0].(*dns.A).A.String() != want[name]:
				c.Wrong.Add(1)
				c.note(fmt.Sprintf("%s: %s, want %s", name, r.Answer[0].(*dns.A).A, want[name]))
			}
		}
	}()
	return c
}

func (c *AnswerChecker) note(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstBad == "" {
		c.firstBad = s
	}
}

// Stop ends the loop and returns the first bad answer seen, if any.
func (c *AnswerChecker) Stop() string {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.firstBad
}
