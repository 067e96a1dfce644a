package yurthosts

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// manyAddresses is hosts text giving name n addresses.
func manyAddresses(name string, n int, second byte) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "10.%d.%d.%d\t%s\n", second, i/250, i%250+1, name)
	}
	return b.String()
}

// serveScrubbed runs a query the way CoreDNS's server does: the handler
// writes through request.ScrubWriter, which fits the reply to the client's
// buffer (512 bytes without EDNS, the EDNS size with it, 65,535 over TCP),
// compressing and then dropping records with TC set.
func serveScrubbed(t *testing.T, y *YurtHosts, req *dns.Msg, tcp bool) (*dns.Msg, int) {
	t.Helper()
	rec := dnstest.NewRecorder(&test.ResponseWriter{TCP: tcp})
	rcode, err := y.ServeDNS(context.Background(), request.NewScrubWriter(req, rec), req)
	if err != nil || rcode != dns.RcodeSuccess || rec.Msg == nil {
		t.Fatalf("%s: rcode %d, err %v, msg %v", req.Question[0].Name, rcode, err, rec.Msg)
	}
	wire, err := rec.Msg.Pack()
	if err != nil {
		t.Fatalf("%s: the reply does not pack: %v", req.Question[0].Name, err)
	}
	return rec.Msg, len(wire)
}

// TestLargeAnswersTruncated: 5000 A records (16 bytes each, compressed) do
// not fit in any DNS message; 4000 fit over TCP. The reply fits the client's
// buffer, keeps as many records as fit, and says TC when some were dropped.
func TestLargeAnswersTruncated(t *testing.T) {
	y := newTestPlugin(manyAddresses("many-5000", 5000, 50)+manyAddresses("many-4000", 4000, 40), tunnelAt(), fall.Zero)
	// 12 header + 14 question ("many-5000." and type/class) + 11 OPT.
	fit := func(size int, edns bool) int {
		size -= 12 + 14
		if edns {
			size -= 11
		}
		return size / 16
	}
	tests := []struct {
		name    string
		tcp     bool
		edns    uint16 // 0: no EDNS
		answers int
		tc      bool
		limit   int
	}{
		{"many-5000.", false, 0, fit(512, false), true, 512}, // 30
		{"many-5000.", false, 1232, fit(1232, true), true, 1232},
		{"many-5000.", false, 4096, fit(4096, true), true, 4096},
		{"many-5000.", false, 100, fit(512, true), true, 512},   // EDNS sizes under 512 count as 512
		{"many-5000.", true, 0, fit(65535, false), true, 65535}, // 4094
		{"many-5000.", true, 1232, fit(65535, true), true, 65535},
		{"many-4000.", true, 0, 4000, false, 65535},
		{"many-4000.", true, 4096, 4000, false, 65535},
		{"many-4000.", false, 1232, fit(1232, true), true, 1232},
		{"MANY-4000.", false, 0, fit(512, false), true, 512},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s tcp=%v edns=%d", tc.name, tc.tcp, tc.edns), func(t *testing.T) {
			req := new(dns.Msg).SetQuestion(tc.name, dns.TypeA)
			if tc.edns > 0 {
				req.SetEdns0(tc.edns, false)
			}
			m, size := serveScrubbed(t, y, req, tc.tcp)
			if len(m.Answer) != tc.answers || m.Truncated != tc.tc || !m.Authoritative || m.Rcode != dns.RcodeSuccess {
				t.Errorf("%d answers tc=%v aa=%v rcode %d; want %d answers tc=%v aa", len(m.Answer), m.Truncated, m.Authoritative, m.Rcode, tc.answers, tc.tc)
			}
			if size > tc.limit {
				t.Errorf("reply of %d bytes, over the client's %d", size, tc.limit)
			}
			if (m.IsEdns0() != nil) != (tc.edns > 0) {
				t.Errorf("OPT in the reply: %v, in the request: %v", m.IsEdns0() != nil, tc.edns > 0)
			}
			for _, rr := range m.Answer {
				if rr.Header().Name != tc.name {
					t.Fatalf("answer owner %q, want the asker's %q", rr.Header().Name, tc.name)
				}
			}
		})
	}
}

// TestLargeAnswersLeftToTheServer: the handler itself writes the whole RRset
// and leaves fitting it to the ScrubWriter every CoreDNS server puts in front
// of the plugins (as the file and hosts plugins do); it does not truncate twice.
func TestLargeAnswersLeftToTheServer(t *testing.T) {
	y := newTestPlugin(manyAddresses("many-5000", 5000, 50), tunnelAt(), fall.Zero)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	if _, err := y.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion("many-5000.", dns.TypeA)); err != nil {
		t.Fatal(err)
	}
	if len(rec.Msg.Answer) != 5000 || rec.Msg.Truncated {
		t.Errorf("handler wrote %d answers (tc=%v), want all 5000", len(rec.Msg.Answer), rec.Msg.Truncated)
	}
}
