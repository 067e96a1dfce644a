package yurthosts

import (
	"context"
	"net"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
)

// ServeDNS implements plugin.Handler. It reads the current snapshot without
// locking and allocates only the response.
func (y *YurtHosts) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	qname := state.Name()
	recs := y.records.Load()

	if state.QType() == dns.TypePTR {
		// Like hosts, reverse answers do not depend on the plugin's zones.
		// Tunnel ClusterIPs are not in the reverse map: the next plugin answers.
		names := recs.ptr(qname)
		if y.noReverse || len(names) == 0 {
			return plugin.NextOrFailure(y.Name(), y.Next, ctx, w, r)
		}
		return y.reply(w, r, ptrRRs(state.QName(), y.ttl, names))
	}

	if plugin.Zones(y.Zones).Matches(qname) == "" {
		return plugin.NextOrFailure(y.Name(), y.Next, ctx, w, r)
	}
	host, found := recs.host(qname)
	if !found {
		if y.Fall.Through(qname) {
			return plugin.NextOrFailure(y.Name(), y.Next, ctx, w, r)
		}
		// NXDOMAIN without the SOA RFC 2308 puts in the authority section:
		// the records come from a ConfigMap, with no zone apex to take an
		// SOA from (hosts answers SERVFAIL for the same lack). The name does
		// not exist, and NXDOMAIN says so where SERVFAIL would be retried;
		// without an SOA a resolver should not cache the denial (RFC 2308
		// §5; CoreDNS's cache keeps it 5 s), so a node that joins resolves
		// soon after.
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeNameError)
		m.Authoritative = true
		w.WriteMsg(m)
		return dns.RcodeNameError, nil
	}

	// A name that exists without the asked type gets NOERROR and no answer.
	var answers []dns.RR
	switch state.QType() {
	case dns.TypeA:
		answers = addressRRs(state.QName(), dns.TypeA, y.ttl, host.v4)
	case dns.TypeAAAA:
		answers = addressRRs(state.QName(), dns.TypeAAAA, y.ttl, host.v6)
	}
	return y.reply(w, r, answers)
}

func (y *YurtHosts) reply(w dns.ResponseWriter, r *dns.Msg, answers []dns.RR) (int, error) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	m.Answer = answers
	w.WriteMsg(m)
	return dns.RcodeSuccess, nil
}

// addressRRs answers with the query's own spelling of the name, so clients
// using DNS 0x20 case randomization accept the answer.
func addressRRs(owner string, rrtype uint16, ttl uint32, ips []net.IP) []dns.RR {
	if len(ips) == 0 {
		return nil
	}
	hdr := dns.RR_Header{Name: owner, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
	answers := make([]dns.RR, len(ips))
	if rrtype == dns.TypeA {
		as := make([]dns.A, len(ips))
		for i, ip := range ips {
			as[i] = dns.A{Hdr: hdr, A: ip}
			answers[i] = &as[i]
		}
		return answers
	}
	aaaas := make([]dns.AAAA, len(ips))
	for i, ip := range ips {
		aaaas[i] = dns.AAAA{Hdr: hdr, AAAA: ip}
		answers[i] = &aaaas[i]
	}
	return answers
}

func ptrRRs(owner string, ttl uint32, names []string) []dns.RR {
	hdr := dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}
	ptrs := make([]dns.PTR, len(names))
	answers := make([]dns.RR, len(names))
	for i, n := range names {
		ptrs[i] = dns.PTR{Hdr: hdr, Ptr: n}
		answers[i] = &ptrs[i]
	}
	return answers
}
