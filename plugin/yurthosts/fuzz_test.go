package yurthosts

import (
	"context"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// fuzzMaxName is 253 characters, 255 bytes on the wire: the longest name.
var fuzzMaxName = strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)

// FuzzServeDNS: any bytes that unpack as a DNS message, served over UDP or
// TCP behind the ScrubWriter CoreDNS's server puts in front of every plugin,
// never panic; the plugin either hands the query on without writing or
// writes one reply that packs, fits the client's buffer, answers the question
// asked, and names the answers as the asker spelled them.
//
// Seeds and regressions: testdata/fuzz/FuzzServeDNS (real queries and the
// edge cases of test/e2e/badinput_dns_test.go).
func FuzzServeDNS(f *testing.F) {
	text := recordsText + "\n" +
		"10.7.0.63\t" + strings.Repeat("l", 63) + "\n" +
		"10.7.2.55\t" + fuzzMaxName + "\n" +
		"fd00::7\t" + fuzzMaxName + "\n" +
		manyAddresses("many", 5000, 50)
	y := newTestPlugin(text, tunnelAt("10.96.0.9"), fall.Zero)
	f.Add(must(new(dns.Msg).SetQuestion("edge-1.", dns.TypeA).Pack()), false)

	f.Fuzz(func(t *testing.T, data []byte, tcp bool) {
		req := new(dns.Msg)
		if err := req.Unpack(data); err != nil {
			return
		}
		question := append([]dns.Question(nil), req.Question...)
		rec := dnstest.NewRecorder(&test.ResponseWriter{TCP: tcp})
		rcode, err := y.ServeDNS(context.Background(), request.NewScrubWriter(req, rec), req)
		if !plugin.ClientWrite(rcode) {
			// Handed to the next plugin (the test's writes nothing).
			if rec.Msg != nil {
				t.Fatalf("rcode %d says nothing was written, but %v was", rcode, rec.Msg)
			}
			return
		}
		if err != nil {
			t.Fatalf("rcode %d with error %v", rcode, err)
		}
		m := rec.Msg
		if m == nil {
			t.Fatalf("rcode %d, but nothing written", rcode)
		}
		wire, err := m.Pack()
		if err != nil {
			t.Fatalf("reply does not pack: %v\n%v", err, m)
		}
		state := request.Request{W: rec, Req: req}
		if len(wire) > state.Size() {
			t.Fatalf("reply of %d bytes over the client's %d (%s)", len(wire), state.Size(), state.Proto())
		}
		if err := new(dns.Msg).Unpack(wire); err != nil {
			t.Fatalf("reply does not unpack: %v", err)
		}
		if m.Id != req.Id || !m.Response || m.Rcode != rcode {
			t.Fatalf("reply header id %d qr %v rcode %d; request id %d, returned rcode %d", m.Id, m.Response, m.Rcode, req.Id, rcode)
		}
		if len(question) == 0 {
			if len(m.Question) != 0 || len(m.Answer) != 0 {
				t.Fatalf("no question asked, reply %v", m)
			}
			return
		}
		if len(m.Question) != 1 || m.Question[0] != question[0] {
			t.Fatalf("reply question %v, asked %v", m.Question, question[0])
		}
		for _, rr := range m.Answer {
			if rr.Header().Name != question[0].Name || rr.Header().Rrtype != question[0].Qtype {
				t.Fatalf("answer %v to question %v", rr, question[0])
			}
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
