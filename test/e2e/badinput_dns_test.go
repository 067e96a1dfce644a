package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"

	"github.com/miekg/dns"
)

// Bad DNS input against the real coredns-yurt binary. Every packet below is
// sent over the wire to the running server; after each one the server must
// still be running and answer a correct query correctly.
//
// The defined responses come from the layers a packet crosses:
//   - miekg/dns (the server's transport): fewer than 12 bytes, or the QR bit
//     set, get no reply at all (a reply to junk can be used for amplification);
//     an opcode other than QUERY/NOTIFY gets NOTIMP; a header with QDCOUNT != 1,
//     ANCOUNT > 1, NSCOUNT > 1 or ARCOUNT > 2 gets FORMERR; a message that does
//     not unpack (a bad name, a record cut short) gets FORMERR, but a count of
//     records that the message ends before is taken as a lie and the records
//     present are used. Over TCP the connection stays open after each of these.
//   - CoreDNS's server: a message that unpacked to no question gets SERVFAIL,
//     a class other than IN gets REFUSED, an EDNS version other than 0 gets
//     BADVERS; every reply is truncated to the client's buffer (512 bytes
//     without EDNS, the EDNS size with it, 65,535 over TCP) with TC set.
//   - yurthosts: A/AAAA answer the name's addresses in the asker's spelling;
//     any other type of an existing name (ANY, unknown types) is NOERROR with
//     no answer; an unknown name is NXDOMAIN (no fallthrough here); a PTR it
//     does not know goes to the next plugin (none here: SERVFAIL).

const (
	badTunnelIP = "10.96.0.9"
	// badCheckName answers badTunnelIP: the query sent after every bad packet.
	badCheckName = "worker-1."
)

var (
	// badLabel63 is a name of one 63-byte label, the longest a label can be.
	badLabel63 = strings.Repeat("l", 63)
	// badMaxName is 253 characters, 255 bytes on the wire (3×64 + 62 + the
	// root label), the longest name DNS allows.
	badMaxName = strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
)

// badInputRecords are the records the server answers: a few nodes, the
// longest names, and two names with thousands of addresses.
type badInputRecords struct {
	lines []string
	// names maps a lower-case FQDN to its number of A and AAAA addresses.
	names map[string][2]int
	// reverse holds the reverse names yurthosts answers.
	reverse map[string]bool
}

func newBadInputRecords() *badInputRecords {
	r := &badInputRecords{names: map[string][2]int{}, reverse: map[string]bool{}}
	add := func(ip, name string) {
		r.lines = append(r.lines, ip+"\t"+name)
		a := netip.MustParseAddr(ip)
		c := r.names[name+"."]
		if a.Is4() {
			c[0]++
		} else {
			c[1]++
		}
		r.names[name+"."] = c
		if ip != badTunnelIP {
			rev, _ := dns.ReverseAddr(ip)
			r.reverse[rev] = true
		}
	}
	add(badTunnelIP, "worker-1")
	add("192.168.0.10", "master-1")
	add("fd00::10", "master-1")
	add("10.7.0.63", badLabel63)
	add("10.7.2.55", badMaxName)
	for i := range 5000 {
		add(fmt.Sprintf("10.50.%d.%d", i/250, i%250+1), "many-5000")
	}
	for i := range 4000 {
		add(fmt.Sprintf("10.40.%d.%d", i/250, i%250+1), "many-4000")
	}
	return r
}

// badOutcome is the defined response to one packet.
type badOutcome struct {
	noReply bool
	rcode   int
	opcode  int
	// flags is the reply's header flags as dig prints them ("qr aa").
	flags string
	// questions and answers are the section lengths; -1 is not checked.
	questions, answers int
	// rcodeOnly checks just the ID, QR, opcode and rcode (random packets).
	rcodeOnly bool
}

func (o badOutcome) String() string {
	if o.noReply {
		return "no reply"
	}
	opcode := dns.OpcodeToString[o.opcode]
	if opcode == "" {
		opcode = strconv.Itoa(o.opcode)
	}
	if o.rcodeOnly {
		return fmt.Sprintf("%s (opcode %s)", dns.RcodeToString[o.rcode], opcode)
	}
	return fmt.Sprintf("%s opcode %s flags %q questions %d answers %d", dns.RcodeToString[o.rcode], opcode, o.flags, o.questions, o.answers)
}

func badReplyFlags(m *dns.Msg) string {
	var f []string
	for _, b := range []struct {
		on   bool
		name string
	}{{m.Response, "qr"}, {m.Authoritative, "aa"}, {m.Truncated, "tc"}, {m.RecursionDesired, "rd"},
		{m.RecursionAvailable, "ra"}, {m.AuthenticatedData, "ad"}, {m.CheckingDisabled, "cd"}} {
		if b.on {
			f = append(f, b.name)
		}
	}
	return strings.Join(f, " ")
}

func badCheckOutcome(id uint16, m *dns.Msg, want badOutcome) error {
	if m.Id != id {
		return fmt.Errorf("reply ID %d, want %d", m.Id, id)
	}
	if !m.Response || m.Rcode != want.rcode || m.Opcode != want.opcode {
		return fmt.Errorf("got QR %v %s opcode %s, want %s", m.Response, dns.RcodeToString[m.Rcode], dns.OpcodeToString[m.Opcode], want)
	}
	if want.rcodeOnly {
		return nil
	}
	if got := badReplyFlags(m); got != want.flags {
		return fmt.Errorf("flags %q, want %q", got, want.flags)
	}
	if want.questions >= 0 && len(m.Question) != want.questions {
		return fmt.Errorf("%d questions, want %d", len(m.Question), want.questions)
	}
	if want.answers >= 0 && len(m.Answer) != want.answers {
		return fmt.Errorf("%d answers, want %d", len(m.Answer), want.answers)
	}
	return nil
}

// predict is the defined response to arbitrary bytes, following the layers
// described at the top of this file.
func (r *badInputRecords) predict(pkt []byte) badOutcome {
	if len(pkt) < 12 {
		return badOutcome{noReply: true}
	}
	bits := binary.BigEndian.Uint16(pkt[2:])
	qd, an, ns, ar := binary.BigEndian.Uint16(pkt[4:]), binary.BigEndian.Uint16(pkt[6:]), binary.BigEndian.Uint16(pkt[8:]), binary.BigEndian.Uint16(pkt[10:])
	opcode := int(bits>>11) & 0xF
	switch {
	case bits&(1<<15) != 0:
		return badOutcome{noReply: true}
	case opcode != dns.OpcodeQuery && opcode != dns.OpcodeNotify:
		return badOutcome{rcode: dns.RcodeNotImplemented, opcode: opcode, rcodeOnly: true}
	case qd != 1 || an > 1 || ns > 1 || ar > 2:
		return badOutcome{rcode: dns.RcodeFormatError, opcode: dns.OpcodeQuery, rcodeOnly: true}
	}
	m := new(dns.Msg)
	if err := m.Unpack(pkt); err != nil {
		return badOutcome{rcode: dns.RcodeFormatError, opcode: dns.OpcodeQuery, rcodeOnly: true}
	}
	o := badOutcome{opcode: opcode, rcodeOnly: true}
	switch {
	case len(m.Question) == 0:
		o.rcode = dns.RcodeServerFailure
	case m.Question[0].Qclass != dns.ClassINET:
		o.rcode = dns.RcodeRefused
	case m.IsEdns0() != nil && m.IsEdns0().Version() != 0:
		o.rcode = dns.RcodeBadVers
	case m.Question[0].Qtype == dns.TypePTR:
		o.rcode = dns.RcodeServerFailure
		if r.reverse[strings.ToLower(m.Question[0].Name)] {
			o.rcode = dns.RcodeSuccess
		}
	default:
		o.rcode = dns.RcodeNameError
		if _, ok := r.names[strings.ToLower(m.Question[0].Name)]; ok {
			o.rcode = dns.RcodeSuccess
		}
	}
	return o
}

// badProber sends packets to the server and checks it after each one.
type badProber struct {
	t        *testing.T
	srv      *harness.CoreDNS
	rng      *rand.Rand
	udp, tcp int // bad packets sent
	checks   int // correct queries answered after a bad packet
	digs     int
}

// checkQuery is a correct query for badCheckName with a fresh ID.
func (p *badProber) checkQuery() *dns.Msg {
	m := new(dns.Msg).SetQuestion(badCheckName, dns.TypeA)
	m.Id = uint16(p.rng.Uint32())
	return m
}

func badCheckReply(q, m *dns.Msg) error {
	if m.Id != q.Id || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		return fmt.Errorf("check query %s: got %v", q.Question[0].Name, m)
	}
	if a, ok := m.Answer[0].(*dns.A); !ok || a.A.String() != badTunnelIP {
		return fmt.Errorf("check query %s: answer %v, want %s", q.Question[0].Name, m.Answer[0], badTunnelIP)
	}
	return nil
}

// alive fails the test unless the process is running and the real dig gets
// the correct answer.
func (p *badProber) alive(after string) {
	p.t.Helper()
	if p.srv.Exited() {
		p.t.Fatalf("coredns-yurt exited after %s:\n%s", after, p.srv.Output())
	}
	r, err := harness.DigErr(p.srv.DNSAddr, badCheckName, "A")
	if err != nil {
		p.t.Fatalf("after %s: %v", after, err)
	}
	if err := matchAnswer(r, "A", []string{badTunnelIP}); err != nil {
		p.t.Fatalf("after %s: dig %s: %v", after, badCheckName, err)
	}
	p.digs++
}

// sendUDP sends pkt as one datagram and checks the reply against want; then
// sends a correct query from the same socket, whose answer must be the next
// datagram (so a bad packet that must get no reply got none before it).
func (p *badProber) sendUDP(name string, pkt []byte, want badOutcome) error {
	p.udp++
	c, err := net.Dial("udp", p.srv.DNSAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(pkt); err != nil {
		return err
	}
	buf := make([]byte, 65535)
	read := func(timeout time.Duration) (*dns.Msg, error) {
		_ = c.SetReadDeadline(time.Now().Add(timeout))
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:n]); err != nil {
			return nil, fmt.Errorf("reply does not unpack: %v", err)
		}
		return m, nil
	}
	if !want.noReply {
		m, err := read(5 * time.Second)
		if err != nil {
			return fmt.Errorf("%s over UDP: want %s: %v", name, want, err)
		}
		if err := badCheckOutcome(binary.BigEndian.Uint16(pkt), m, want); err != nil {
			return fmt.Errorf("%s over UDP: %v", name, err)
		}
	}
	q := p.checkQuery()
	wire, _ := q.Pack()
	if _, err := c.Write(wire); err != nil {
		return err
	}
	m, err := read(5 * time.Second)
	if err != nil {
		return fmt.Errorf("after %s over UDP: check query: %v", name, err)
	}
	if want.noReply && m.Id != q.Id {
		return fmt.Errorf("%s over UDP: want no reply, got %v", name, m)
	}
	if err := badCheckReply(q, m); err != nil {
		return fmt.Errorf("after %s over UDP: %v", name, err)
	}
	if want.noReply {
		// A late reply to the bad packet would show up now.
		if m, err := read(10 * time.Millisecond); err == nil {
			return fmt.Errorf("%s over UDP: want no reply, got %v", name, m)
		}
	}
	p.checks++
	if p.srv.Exited() {
		return fmt.Errorf("coredns-yurt exited after %s over UDP", name)
	}
	return nil
}

func badWriteFrame(c net.Conn, pkt []byte) error {
	frame := binary.BigEndian.AppendUint16(nil, uint16(len(pkt)))
	_, err := c.Write(append(frame, pkt...))
	return err
}

func badReadFrame(c net.Conn, timeout time.Duration) (*dns.Msg, error) {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf); err != nil {
		return nil, fmt.Errorf("reply does not unpack: %v", err)
	}
	return m, nil
}

// sendTCP sends pkt as one length-prefixed message on a new connection and
// checks the reply; then a correct query on the same connection must get the
// next reply (the server handles a connection's messages in order, so a bad
// packet that must get no reply got none, and the connection stayed usable).
func (p *badProber) sendTCP(name string, pkt []byte, want badOutcome) error {
	p.tcp++
	c, err := net.Dial("tcp", p.srv.DNSAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := badWriteFrame(c, pkt); err != nil {
		return err
	}
	if !want.noReply {
		m, err := badReadFrame(c, 5*time.Second)
		if err != nil {
			return fmt.Errorf("%s over TCP: want %s: %v", name, want, err)
		}
		if err := badCheckOutcome(binary.BigEndian.Uint16(pkt), m, want); err != nil {
			return fmt.Errorf("%s over TCP: %v", name, err)
		}
	}
	q := p.checkQuery()
	wire, _ := q.Pack()
	if err := badWriteFrame(c, wire); err != nil {
		return fmt.Errorf("after %s over TCP: connection closed: %v", name, err)
	}
	m, err := badReadFrame(c, 5*time.Second)
	if err != nil {
		return fmt.Errorf("after %s over TCP: check query on the same connection: %v", name, err)
	}
	if want.noReply && m.Id != q.Id {
		return fmt.Errorf("%s over TCP: want no reply, got %v", name, m)
	}
	if err := badCheckReply(q, m); err != nil {
		return fmt.Errorf("after %s over TCP: %v", name, err)
	}
	p.checks++
	if p.srv.Exited() {
		return fmt.Errorf("coredns-yurt exited after %s over TCP", name)
	}
	return nil
}

// Raw packet building.

type badHeader struct {
	id             uint16
	bits           uint16
	qd, an, ns, ar uint16
}

func (h badHeader) wire() []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint16(b, h.id)
	binary.BigEndian.PutUint16(b[2:], h.bits)
	binary.BigEndian.PutUint16(b[4:], h.qd)
	binary.BigEndian.PutUint16(b[6:], h.an)
	binary.BigEndian.PutUint16(b[8:], h.ns)
	binary.BigEndian.PutUint16(b[10:], h.ar)
	return b
}

func badOpcode(op int) uint16 { return uint16(op) << 11 }

// badWireName encodes labels as given (no checks), ending with the root label.
func badWireName(labels ...string) []byte {
	var b []byte
	for _, l := range labels {
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0)
}

func badQuestion(name []byte, qtype, qclass uint16) []byte {
	b := append([]byte{}, name...)
	b = binary.BigEndian.AppendUint16(b, qtype)
	return binary.BigEndian.AppendUint16(b, qclass)
}

func badCat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func badPacked(m *dns.Msg) []byte {
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

// badCase is one bad packet with its defined response.
type badCase struct {
	name string
	pkt  []byte
	want badOutcome
}

func namedBadPackets() []badCase {
	worker := badWireName("worker-1")
	qA := badQuestion(worker, dns.TypeA, dns.ClassINET)
	var id uint16 = 0x4242
	h := func(bits, qd, an, ns, ar uint16) []byte { return badHeader{id, bits, qd, an, ns, ar}.wire() }
	formerr := func(questions int) badOutcome {
		return badOutcome{rcode: dns.RcodeFormatError, opcode: dns.OpcodeQuery, flags: "qr", questions: questions, answers: 0}
	}
	notimp := func(op int) badOutcome {
		return badOutcome{rcode: dns.RcodeNotImplemented, opcode: op, flags: "qr", questions: 0, answers: 0}
	}
	opt := func(version uint8, udpSize uint16) []byte {
		// Root name, type OPT, class = UDP size, TTL = ext-rcode|version|flags, no data.
		b := []byte{0}
		b = binary.BigEndian.AppendUint16(b, dns.TypeOPT)
		b = binary.BigEndian.AppendUint16(b, udpSize)
		b = append(b, 0, version, 0, 0)
		return binary.BigEndian.AppendUint16(b, 0)
	}
	answerRR := func() []byte {
		// worker-1 A 10.96.0.9 with a compression pointer to the question name.
		b := []byte{0xC0, 12}
		b = binary.BigEndian.AppendUint16(b, dns.TypeA)
		b = binary.BigEndian.AppendUint16(b, dns.ClassINET)
		b = binary.BigEndian.AppendUint32(b, 5)
		b = binary.BigEndian.AppendUint16(b, 4)
		return append(b, 10, 96, 0, 9)
	}
	answered := badOutcome{rcode: dns.RcodeSuccess, opcode: dns.OpcodeQuery, flags: "qr aa", questions: 1, answers: 1}
	name256 := badWireName(strings.Repeat("a", 63), strings.Repeat("b", 63), strings.Repeat("c", 63), strings.Repeat("d", 62))
	return []badCase{
		// Truncated headers: no reply.
		{"empty message", nil, badOutcome{noReply: true}},
		{"1 byte", []byte{0x42}, badOutcome{noReply: true}},
		{"11 bytes (header cut short)", h(0, 1, 0, 0, 0)[:11], badOutcome{noReply: true}},
		// A response sent to the server: ignored.
		{"QR bit set (a response)", badCat(h(1<<15, 1, 1, 0, 0), qA, answerRR()), badOutcome{noReply: true}},
		// Question section.
		{"header only, QDCOUNT 1, no question", h(0, 1, 0, 0, 0),
			badOutcome{rcode: dns.RcodeServerFailure, opcode: dns.OpcodeQuery, flags: "qr", questions: 0, answers: 0}},
		{"no question (QDCOUNT 0)", h(0, 0, 0, 0, 0), formerr(0)},
		{"QDCOUNT 0 with a question present", badCat(h(0, 0, 0, 0, 0), qA), formerr(0)},
		{"two questions", badCat(h(0, 2, 0, 0, 0), qA, badQuestion(badWireName("master-1"), dns.TypeA, dns.ClassINET)), formerr(0)},
		{"QDCOUNT 2, one question present", badCat(h(0, 2, 0, 0, 0), qA), formerr(0)},
		{"QDCOUNT 65535", badCat(h(0, 65535, 0, 0, 0), qA), formerr(0)},
		{"question name cut short", badCat(h(0, 1, 0, 0, 0), []byte{10, 'w', 'o', 'r'}), formerr(0)},
		{"question without QTYPE and QCLASS", badCat(h(0, 1, 0, 0, 0), worker),
			badOutcome{rcode: dns.RcodeRefused, opcode: dns.OpcodeQuery, flags: "qr", questions: 1, answers: 0}},
		{"question without QCLASS", badCat(h(0, 1, 0, 0, 0), worker, []byte{0, 1}),
			badOutcome{rcode: dns.RcodeRefused, opcode: dns.OpcodeQuery, flags: "qr", questions: 1, answers: 0}},
		{"question with half a QTYPE", badCat(h(0, 1, 0, 0, 0), worker, []byte{0}), formerr(0)},
		{"compression pointer to itself", badCat(h(0, 1, 0, 0, 0), []byte{0xC0, 12}, []byte{0, 1, 0, 1}), formerr(0)},
		{"compression pointer past the end", badCat(h(0, 1, 0, 0, 0), []byte{0xC0, 200}, []byte{0, 1, 0, 1}), formerr(0)},
		{"label of 64 bytes", badCat(h(0, 1, 0, 0, 0), badQuestion(badWireName(strings.Repeat("x", 64)), dns.TypeA, dns.ClassINET)), formerr(0)},
		{"name of 256 bytes on the wire", badCat(h(0, 1, 0, 0, 0), badQuestion(name256, dns.TypeA, dns.ClassINET)), formerr(0)},
		// Header counts claiming records that are not there (within the
		// limits above): the message ends where the records would start,
		// miekg/dns takes the counts for the lie they are, and the query is
		// answered.
		{"ANCOUNT 1, answer missing", badCat(h(0, 1, 1, 0, 0), qA), answered},
		{"NSCOUNT 1, authority missing", badCat(h(0, 1, 0, 1, 0), qA), answered},
		{"ARCOUNT 2, additional missing", badCat(h(0, 1, 0, 0, 2), qA), answered},
		{"ARCOUNT 2, one OPT present", badCat(h(0, 1, 0, 0, 2), qA, opt(0, 1232)), answered},
		{"ANCOUNT 1, NSCOUNT 1, ARCOUNT 2, nothing present", badCat(h(0, 1, 1, 1, 2), qA), answered},
		// A record that is there but cut short does not unpack.
		{"OPT record cut short", badCat(h(0, 1, 0, 0, 1), qA, opt(0, 1232)[:7]), formerr(1)},
		{"ANCOUNT 2 (over the limit)", badCat(h(0, 1, 2, 0, 0), qA, answerRR(), answerRR()), formerr(0)},
		{"ARCOUNT 65535", badCat(h(0, 1, 0, 0, 65535), qA), formerr(0)},
		// Opcodes and classes the server does not serve.
		{"opcode UPDATE", badCat(h(badOpcode(dns.OpcodeUpdate), 1, 0, 0, 0), qA), notimp(dns.OpcodeUpdate)},
		{"opcode STATUS", badCat(h(badOpcode(dns.OpcodeStatus), 1, 0, 0, 0), qA), notimp(dns.OpcodeStatus)},
		{"opcode 15 (unassigned)", badCat(h(badOpcode(15), 1, 0, 0, 0), qA), notimp(15)},
		{"class CHAOS", badCat(h(0, 1, 0, 0, 0), badQuestion(worker, dns.TypeA, dns.ClassCHAOS)),
			badOutcome{rcode: dns.RcodeRefused, opcode: dns.OpcodeQuery, flags: "qr", questions: 1, answers: 0}},
		{"EDNS version 1", badCat(h(0, 1, 0, 0, 1), qA, opt(1, 1232)),
			badOutcome{rcode: dns.RcodeBadVers, opcode: dns.OpcodeQuery, flags: "qr", questions: 1, answers: 0}},
		// Bytes after a complete query are ignored: it is answered.
		{"trailing garbage after a query", badCat(h(0, 1, 0, 0, 0), qA, []byte("garbage\x00\xff")),
			badOutcome{rcode: dns.RcodeSuccess, opcode: dns.OpcodeQuery, flags: "qr aa", questions: 1, answers: 1}},
	}
}

// The TestBadInputDNS* tests send malformed and extreme DNS packets to the
// real coredns-yurt binary over UDP and TCP, assert the defined response to
// each, and check after every one that the server is alive and answers.
//
// Most of them probe CoreDNS's own server code and miekg/dns, not yurthosts:
// malformed packets, broken TCP framing and random packets are answered (or
// dropped) before any plugin runs, and truncation to the client's buffer is
// the server's too. They are here because coredns-yurt ships that code: it
// must not crash, hang or answer junk whatever arrives. The tests of what
// yurthosts answers are ANY and unknown types, longest names and labels,
// case is kept, and thousands of addresses.
//
// They share one server (badDNS), in the order they are declared; the
// last, TestBadInputDNSNoCrash, checks nothing that came before crashed it.

// badDNSFixture is the server every TestBadInputDNS* test sends to: the
// records of newBadInputRecords served by coredns-yurt, and one prober
// counting what all of them sent.
type badDNSFixture struct {
	recs *badInputRecords
	cp   *harness.ControlPlane
	srv  *harness.CoreDNS
	p    *badProber
}

var badDNS = &shared[*badDNSFixture]{build: func(tb harness.TB) *badDNSFixture {
	recs := newBadInputRecords()
	cp := harness.Start(tb, harness.Options{})
	cp.CreateService(tb, harness.TunnelService(badTunnelIP))
	cp.ApplyConfigMap(tb, recordsConfigMap(recs.lines...))
	srv := harness.StartCoreDNS(tb, cp.Kubeconfig, onlyYurthosts)
	harness.Eventually(tb, 10*time.Second, func() error {
		r, err := harness.DigErr(srv.DNSAddr, "many-4000", "A", "+tcp")
		if err != nil {
			return err
		}
		if len(r.Answers) != 4000 {
			return fmt.Errorf("many-4000: %d answers", len(r.Answers))
		}
		return nil
	})
	// Fixed seed: the same packets every run.
	return &badDNSFixture{recs: recs, cp: cp, srv: srv, p: &badProber{srv: srv, rng: rand.New(rand.NewPCG(20260721, 1))}}
}}

// prober is the shared prober, reporting to t.
func (f *badDNSFixture) prober(t *testing.T) *badProber {
	f.p.t = t
	return f.p
}

// TestBadInputDNSMalformedPackets sends each named malformed packet over UDP
// and TCP and expects its defined response (CoreDNS's server and miekg/dns,
// not yurthosts, answer them).
func TestBadInputDNSMalformedPackets(t *testing.T) {
	f := badDNS.get(t)
	p := f.prober(t)
	for _, c := range namedBadPackets() {
		if err := p.sendUDP(c.name, c.pkt, c.want); err != nil {
			t.Error(err)
		}
		if err := p.sendTCP(c.name, c.pkt, c.want); err != nil {
			t.Error(err)
		}
		p.alive(c.name)
	}
}

// TestBadInputDNSBrokenTCPFraming: length prefixes that lie get no reply,
// and pipelined queries are answered in order (CoreDNS's server code).
func TestBadInputDNSBrokenTCPFraming(t *testing.T) {
	f := badDNS.get(t)
	p, srv := f.prober(t), f.srv
	// ID 0xFFFF: read as a length prefix it claims more bytes than follow.
	q := new(dns.Msg).SetQuestion(badCheckName, dns.TypeA)
	q.Id = 0xFFFF
	query := badPacked(q)
	for _, c := range []struct {
		name  string
		bytes []byte
	}{
		{"length prefix cut short", []byte{0}},
		{"length 100, 20 bytes sent", badCat([]byte{0, 100}, query[:20])},
		{"length 65535, a query sent", badCat([]byte{0xFF, 0xFF}, query)},
		{"length 2, then a query without its prefix", badCat([]byte{0, 2}, query)},
	} {
		p.tcp++
		conn, err := net.Dial("tcp", srv.DNSAddr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(c.bytes); err != nil {
			t.Fatal(err)
		}
		// Nothing the server can answer: no reply before we hang up.
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := conn.Read(make([]byte, 512)); n > 0 || !badIsTimeout(err) && !errors.Is(err, io.EOF) {
			t.Errorf("%s: want no reply, got %d bytes, %v", c.name, n, err)
		}
		conn.Close()
		p.alive(c.name)
	}
	// Several queries in one write are answered in order.
	conn, err := net.Dial("tcp", srv.DNSAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var burst []byte
	var queries []*dns.Msg
	for range 20 {
		q := p.checkQuery()
		queries = append(queries, q)
		burst = badCat(burst, binary.BigEndian.AppendUint16(nil, uint16(len(badPacked(q)))), badPacked(q))
	}
	p.tcp++
	if _, err := conn.Write(burst); err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		m, err := badReadFrame(conn, 5*time.Second)
		if err != nil {
			t.Fatalf("pipelined queries: %v", err)
		}
		if err := badCheckReply(q, m); err != nil {
			t.Errorf("pipelined queries, in order: %v", err)
		}
	}
}

// TestBadInputDNSRandomPackets sends random and mutated packets, each with
// its predicted response (mostly CoreDNS's server code and miekg/dns).
func TestBadInputDNSRandomPackets(t *testing.T) {
	f := badDNS.get(t)
	p, recs := f.prober(t), f.recs
	const perKind = 100
	seeds := [][]byte{
		badPacked(new(dns.Msg).SetQuestion(badCheckName, dns.TypeA)),
		badPacked(new(dns.Msg).SetQuestion("MASTER-1.", dns.TypeAAAA)),
		badPacked(new(dns.Msg).SetQuestion(badMaxName+".", dns.TypeA)),
		badPacked(new(dns.Msg).SetQuestion("many-5000.", dns.TypeA).SetEdns0(1232, true)),
		badPacked(new(dns.Msg).SetQuestion("10.0.168.192.in-addr.arpa.", dns.TypePTR)),
		badPacked(new(dns.Msg).SetQuestion("nope.", dns.TypeANY)),
	}
	gen := []struct {
		kind string
		make func() []byte
	}{
		{"random bytes", func() []byte {
			b := make([]byte, p.rng.IntN(600))
			for i := range b {
				b[i] = byte(p.rng.Uint32())
			}
			return b
		}},
		{"valid header, random rest", func() []byte {
			b := badHeader{uint16(p.rng.Uint32()), uint16(p.rng.IntN(2)) << 8, 1, uint16(p.rng.IntN(2)), uint16(p.rng.IntN(2)), uint16(p.rng.IntN(3))}.wire()
			for range p.rng.IntN(300) {
				b = append(b, byte(p.rng.Uint32()))
			}
			return b
		}},
		{"mutated query", func() []byte {
			b := append([]byte{}, seeds[p.rng.IntN(len(seeds))]...)
			switch p.rng.IntN(3) {
			case 0: // flip bits
				for range 1 + p.rng.IntN(4) {
					b[p.rng.IntN(len(b))] ^= 1 << p.rng.IntN(8)
				}
			case 1: // overwrite bytes after the ID
				for range 1 + p.rng.IntN(4) {
					b[2+p.rng.IntN(len(b)-2)] = byte(p.rng.Uint32())
				}
			default: // cut short
				b = b[:p.rng.IntN(len(b))]
			}
			return b
		}},
	}
	outcomes := map[string]int{}
	for _, g := range gen {
		for i := range perKind {
			for _, tcp := range []bool{false, true} {
				pkt := g.make()
				want := recs.predict(pkt)
				outcomes[want.String()]++
				name := fmt.Sprintf("%s #%d (%x)", g.kind, i, pkt)
				send := p.sendUDP
				if tcp {
					send = p.sendTCP
				}
				if err := send(name, pkt, want); err != nil {
					t.Error(err)
				}
			}
			if i%10 == 9 {
				p.alive(g.kind)
			}
		}
	}
	t.Logf("random packets by defined response: %v", outcomes)
}

// TestBadInputDNSAnyAndUnknownTypes: yurthosts answers ANY and unknown types
// of an existing name with NODATA, of an unknown one with NXDOMAIN.
func TestBadInputDNSAnyAndUnknownTypes(t *testing.T) {
	f := badDNS.get(t)
	p, srv := f.prober(t), f.srv
	for _, c := range []struct {
		name, qtype string
		want        string
	}{
		{"worker-1", "ANY", "NODATA"},
		{"master-1", "ANY", "NODATA"},
		{"nope", "ANY", "NXDOMAIN"},
		{"worker-1", "TYPE65280", "NODATA"},
		{"master-1", "TYPE65280", "NODATA"},
		{"nope", "TYPE65280", "NXDOMAIN"},
		{"worker-1", "TYPE0", "NODATA"},
		{"worker-1", "MX", "NODATA"},
	} {
		for _, transport := range []string{"+notcp", "+tcp"} {
			r := harness.Dig(t, srv.DNSAddr, c.name, c.qtype, transport)
			if err := matchAnswer(r, c.qtype, []string{c.want}); err != nil {
				t.Errorf("%s %s %s: %v", c.name, c.qtype, transport, err)
			}
			if !r.HasFlag("aa") || r.HasFlag("tc") {
				t.Errorf("%s %s %s: flags %v, want aa and no tc", c.name, c.qtype, transport, r.Flags)
			}
		}
		p.alive(c.name + " " + c.qtype)
	}
}

// TestBadInputDNSLongestNames: yurthosts answers the longest label and name
// DNS allows, in the asker's spelling, and their PTR.
func TestBadInputDNSLongestNames(t *testing.T) {
	f := badDNS.get(t)
	p, srv := f.prober(t), f.srv
	if n := len(badPacked(new(dns.Msg).SetQuestion(badMaxName+".", dns.TypeA))) - 12 - 4; n != 255 {
		t.Fatalf("badMaxName is %d bytes on the wire, want 255", n)
	}
	for _, c := range []struct{ name, ip string }{
		{badLabel63, "10.7.0.63"},
		{strings.ToUpper(badLabel63), "10.7.0.63"},
		{badMaxName, "10.7.2.55"},
		{strings.ToUpper(badMaxName[:100]) + badMaxName[100:], "10.7.2.55"},
	} {
		for _, transport := range []string{"+notcp", "+tcp"} {
			r := harness.Dig(t, srv.DNSAddr, c.name, "A", transport)
			if err := matchAnswer(r, "A", []string{c.ip}); err != nil {
				t.Errorf("%.20s... %s: %v", c.name, transport, err)
			} else if r.Answers[0].Name != c.name+"." {
				t.Errorf("answer owner %q, want the asker's %q", r.Answers[0].Name, c.name+".")
			}
			p.alive("a long name")
		}
	}
	// PTR of the long names' addresses.
	r := harness.Dig(t, srv.DNSAddr, "55.2.7.10.in-addr.arpa.", "PTR")
	if err := matchAnswer(r, "PTR", []string{badMaxName + "."}); err != nil {
		t.Error(err)
	}
}

// TestBadInputDNSCaseIsKept: yurthosts answers any spelling, keeping the
// asker's case in the question and the answer.
func TestBadInputDNSCaseIsKept(t *testing.T) {
	f := badDNS.get(t)
	p, srv := f.prober(t), f.srv
	for _, name := range []string{"WORKER-1", "WoRkEr-1", "worker-1", "wOrKeR-1."} {
		r := harness.Dig(t, srv.DNSAddr, name, "A")
		if err := matchAnswer(r, "A", []string{badTunnelIP}); err != nil {
			t.Errorf("%s: %v", name, err)
		} else if want := strings.TrimSuffix(name, ".") + "."; r.Answers[0].Name != want {
			t.Errorf("answer owner %q, want the asker's %q", r.Answers[0].Name, want)
		}
	}
	// The question section comes back as asked, too (dig does not show it parsed).
	q := new(dns.Msg).SetQuestion("MaStEr-1.", dns.TypeAAAA)
	m, err := dns.Exchange(q, srv.DNSAddr)
	if err != nil {
		t.Fatal(err)
	}
	if m.Question[0].Name != "MaStEr-1." || len(m.Answer) != 1 || m.Answer[0].Header().Name != "MaStEr-1." {
		t.Errorf("question and answer must keep the asker's case: %v", m)
	}
	p.alive("mixed case")
}

// TestBadInputDNSThousandsOfAddresses: names with thousands of addresses are
// truncated to the client's buffer with TC set (the server's truncation of
// yurthosts' answers).
func TestBadInputDNSThousandsOfAddresses(t *testing.T) {
	f := badDNS.get(t)
	p, srv, cp := f.prober(t), f.srv, f.cp
	// Question "many-5000." is 10+4 bytes; each A record 16 bytes (a
	// 2-byte pointer to the question name, 10 bytes of type, class, TTL
	// and length, 4 of address); an OPT record with no options 11 bytes.
	fit := func(size int, edns bool) int {
		size -= 12 + 14
		if edns {
			size -= 11
		}
		return size / 16
	}
	for _, c := range []struct {
		name    string
		args    []string
		answers int
		tc      bool
		limit   int
	}{
		{"many-5000", []string{"+noedns", "+ignore"}, fit(512, false), true, 512},
		{"many-5000", []string{"+bufsize=1232", "+ignore"}, fit(1232, true), true, 1232},
		{"many-5000", []string{"+bufsize=4096", "+ignore"}, fit(4096, true), true, 4096},
		{"many-5000", []string{"+bufsize=16384", "+ignore"}, fit(16384, true), true, 16384},
		{"many-5000", []string{"+tcp", "+noedns"}, fit(65535, false), true, 65535},
		{"many-5000", []string{"+tcp"}, fit(65535, true), true, 65535},
		{"many-4000", []string{"+tcp"}, 4000, false, 65535},
		{"many-4000", []string{"+tcp", "+noedns"}, 4000, false, 65535},
		{"many-4000", []string{"+bufsize=1232", "+ignore"}, fit(1232, true), true, 1232},
		{"many-4000", []string{"+noedns", "+ignore"}, fit(512, false), true, 512},
	} {
		label := c.name + " " + strings.Join(c.args, " ")
		r := harness.Dig(t, srv.DNSAddr, c.name, "A", append(c.args, "+stats")...)
		if r.Status != "NOERROR" || len(r.Answers) != c.answers || r.HasFlag("tc") != c.tc || !r.HasFlag("aa") {
			t.Errorf("%s: got %s flags %v with %d answers, want NOERROR aa tc=%v with %d answers",
				label, r.Status, r.Flags, len(r.Answers), c.tc, c.answers)
		}
		if size := badMsgSize(t, r.Raw); size > c.limit {
			t.Errorf("%s: reply of %d bytes, over the client's %d", label, size, c.limit)
		}
		p.alive(label)
	}
	t.Logf("answers that fit: UDP 512 %d, EDNS 1232 %d, TCP %d", fit(512, false), fit(1232, true), fit(65535, false))

	// 65,507 bytes, the largest UDP payload over IPv4 (dig's UDP receive
	// buffer is smaller than that, so this one uses miekg/dns).
	udp := &dns.Client{UDPSize: 65535, Timeout: 5 * time.Second}
	q := new(dns.Msg).SetQuestion("many-5000.", dns.TypeA).SetEdns0(65507, false)
	if m, _, err := udp.Exchange(q, srv.DNSAddr); err != nil {
		t.Errorf("EDNS 65507 over UDP: %v", err)
	} else if m.Compress = true; len(m.Answer) != fit(65507, true) || !m.Truncated || !m.Authoritative || m.Len() > 65507 {
		t.Errorf("EDNS 65507 over UDP: %d answers, tc %v, aa %v, %d bytes; want %d answers, tc, aa, at most 65507 bytes",
			len(m.Answer), m.Truncated, m.Authoritative, m.Len(), fit(65507, true))
	}
	p.alive("EDNS 65507 over UDP")

	// The documented limit (README "Limits"): CoreDNS truncates to the
	// client's EDNS size as given, and a UDP datagram cannot carry more
	// than 65,507 bytes, so a client advertising more gets no UDP reply
	// for an answer that does not fit in a datagram (the bufsize plugin
	// caps what clients advertise). The server carries on; TCP answers.
	q = new(dns.Msg).SetQuestion("many-5000.", dns.TypeA).SetEdns0(65535, false)
	c := &dns.Client{UDPSize: 65535, Timeout: time.Second}
	if m, _, err := c.Exchange(q, srv.DNSAddr); !badIsTimeout(err) {
		t.Errorf("EDNS 65535 over UDP: want no reply (the documented limit), got %v %v", m, err)
	}
	p.alive("EDNS 65535 over UDP")
	c.Net = "tcp"
	m, _, err := c.Exchange(q, srv.DNSAddr)
	if err != nil || len(m.Answer) != fit(65535, true) || !m.Truncated {
		t.Errorf("EDNS 65535 over TCP: want %d answers with TC, got %v", fit(65535, true), err)
	}
	// The documented remedy: bufsize caps what clients advertise.
	capped := harness.StartCoreDNS(t, cp.Kubeconfig, `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    bufsize 1232
    yurthosts {
        kubeconfig {{.Kubeconfig}}
    }
}
`)
	c.Net = "udp"
	m, _, err = c.Exchange(q, capped.DNSAddr)
	if err != nil || len(m.Answer) != fit(1232, true) || !m.Truncated {
		t.Errorf("EDNS 65535 over UDP with bufsize 1232: want %d answers with TC, got %v", fit(1232, true), err)
	}
}

// TestBadInputDNSNoCrash: after all of the above, no panic was counted or
// logged and the server still runs.
func TestBadInputDNSNoCrash(t *testing.T) {
	f := badDNS.get(t)
	t.Cleanup(badDNS.close) // the last of them
	p, srv := f.prober(t), f.srv
	if got := harness.Metric(t, srv.MetricsURL, "coredns_panics_total"); got != 0 {
		t.Errorf("coredns_panics_total = %v, want 0", got)
	}
	if strings.Contains(srv.Output(), "panic") {
		t.Errorf("the server logged a panic:\n%s", srv.Output())
	}
	if srv.Exited() {
		t.Fatal("coredns-yurt exited")
	}
	t.Logf("bad packets sent: %d over UDP, %d over TCP; %d correct queries answered in between, %d dig checks",
		p.udp, p.tcp, p.checks, p.digs)
}

var badMsgSizeRE = regexp.MustCompile(`MSG SIZE\s+rcvd: (\d+)`)

func badMsgSize(t *testing.T, digOutput string) int {
	t.Helper()
	m := badMsgSizeRE.FindStringSubmatch(digOutput)
	if m == nil {
		t.Fatalf("no MSG SIZE in dig output:\n%s", digOutput)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func badIsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
