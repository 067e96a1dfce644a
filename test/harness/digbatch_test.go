package harness

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestDigBatch: the real dig in batch mode answers each query with its own
// answer, in order, also after a lookup that timed out; each query comes
// from a source port of its own (a new socket, a new TCP connection), as a
// new dig's would; a server that never answers is an error after dig's own
// timeout.
func TestDigBatch(t *testing.T) {
	var mu sync.Mutex
	ports := map[string]int{} // source address → queries from it
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if q := r.Question[0]; q.Name == "foo.example." && q.Qtype == dns.TypeA {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(192, 0, 2, 1)}}
		} else {
			m.Rcode = dns.RcodeNameError
		}
		mu.Lock()
		ports[w.RemoteAddr().Network()+" "+w.RemoteAddr().String()]++
		mu.Unlock()
		w.WriteMsg(m)
	})
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", udp.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*dns.Server{{PacketConn: udp, Handler: handler}, {Listener: tcp, Handler: handler}} {
		go s.ActivateAndServe()
		defer s.Shutdown()
	}
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // never read: dig times out
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	command := func(args ...string) *exec.Cmd { return exec.Command("dig", args...) }
	// 3 s, not the probes' 1: make test runs this beside the e2e tests.
	overUDP, err := StartDigBatch(command, "+time=3", "+tries=1")
	if err != nil {
		t.Fatal(err)
	}
	overTCP, err := StartDigBatch(command, "+time=3", "+tries=1", "+tcp")
	if err != nil {
		t.Fatal(err)
	}
	server := udp.LocalAddr().String()
	for i, c := range []struct {
		batch        *DigBatch
		server, name string
		want         string // status and A data; "" = an error
	}{
		{overUDP, server, "foo.example", "NOERROR 192.0.2.1"},
		{overTCP, server, "foo.example", "NOERROR 192.0.2.1"},
		{overUDP, server, "bar.example", "NXDOMAIN "},
		{overTCP, server, "bar.example", "NXDOMAIN "},
		{overUDP, server, "foo.example", "NOERROR 192.0.2.1"},
		{overTCP, server, "foo.example", "NOERROR 192.0.2.1"},
		// Last: the other batch waits meanwhile, and its next lookup
		// would get its 3 s less that wait (DigBatch says why).
		{overUDP, silent.LocalAddr().String(), "foo.example", ""},
		{overUDP, server, "foo.example", "NOERROR 192.0.2.1"},
	} {
		r, err := c.batch.Ask(c.server, c.name, "A")
		got := r.Status + " " + strings.Join(r.Data("A"), ",")
		switch {
		case c.want == "" && (err == nil || !strings.Contains(err.Error(), "timed out")):
			t.Errorf("query %d (%s from a server that never answers): %q, %v; want dig's time-out", i, c.name, got, err)
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("query %d (%s): %q, %v; want %q", i, c.name, got, err, c.want)
		}
	}
	for _, b := range []*DigBatch{overUDP, overTCP} {
		if err := b.Close(); err != nil {
			t.Errorf("dig at the end of its input: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for port, n := range ports {
		if n > 1 {
			t.Errorf("%d UDP queries from %s: want a source port per query, as a new dig's (%v)", n, port, ports)
		}
	}
	if len(ports) != 7 {
		t.Errorf("queries from %d source addresses, want 7 (3 over TCP): %v", len(ports), ports)
	}
	overTCPs := 0
	for addr := range ports {
		if strings.HasPrefix(addr, "tcp ") {
			overTCPs++
		}
	}
	if overTCPs != 3 {
		t.Errorf("%d of the queries over TCP, want 3: %v", overTCPs, ports)
	}
}

// StartDigBatch returns once dig answers, so that a probe's first query is
// not timed with dig's start: a dig that takes 2 s to start makes
// StartDigBatch take them.
func TestDigBatchReadyWhenStarted(t *testing.T) {
	const startup = 2 * time.Second
	slow := func(args ...string) *exec.Cmd {
		return exec.Command("sh", append([]string{"-c", fmt.Sprintf("sleep %d; exec dig \"$@\"", int(startup.Seconds())), "dig"}, args...)...)
	}
	started := time.Now()
	b, err := StartDigBatch(slow, "+time=3", "+tries=1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if took := time.Since(started); took < startup {
		t.Errorf("StartDigBatch returned after %s, before dig started (%s)", took, startup)
	}
}
