package harness

import (
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// RR is one record of dig's answer section.
type RR struct {
	Name string
	TTL  uint32
	Type string
	Data string
}

// DigResult is what dig printed: the response code, header flags and answers.
type DigResult struct {
	Status  string // NOERROR, NXDOMAIN, SERVFAIL, ...
	Flags   []string
	Answers []RR
	Raw     string
}

// Data returns the answers' data (addresses, names) of the given type, sorted.
func (r DigResult) Data(rrType string) []string {
	var out []string
	for _, rr := range r.Answers {
		if rr.Type == rrType {
			out = append(out, rr.Data)
		}
	}
	slices.Sort(out)
	return out
}

// HasFlag reports whether the header carried flag (e.g. "aa", "tc").
func (r DigResult) HasFlag(flag string) bool { return slices.Contains(r.Flags, flag) }

var (
	statusRE = regexp.MustCompile(`status: ([A-Z]+)`)
	flagsRE  = regexp.MustCompile(`;; flags: ([a-z ]*);`)
)

// Dig runs the real dig against server ("127.0.0.1:5353") for name and
// qtype; extra are further dig options such as "+tcp". It fails the test if
// dig cannot get an answer at all.
func Dig(t TB, server, name, qtype string, extra ...string) DigResult {
	t.Helper()
	r, err := DigErr(server, name, qtype, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// DigErr is Dig returning the error instead of failing, for polling.
func DigErr(server, name, qtype string, extra ...string) (DigResult, error) {
	return DigWith(func(args ...string) ([]byte, error) {
		return exec.Command("dig", args...).CombinedOutput()
	}, server, name, qtype, extra...)
}

// DigWith is DigErr with dig run by run, e.g. inside a node's network
// namespace; run gets dig's arguments.
func DigWith(run func(args ...string) ([]byte, error), server, name, qtype string, extra ...string) (DigResult, error) {
	at, err := digServerArgs(server)
	if err != nil {
		return DigResult{}, err
	}
	args := append(append(at, "+time=2", "+tries=1", "+noall", "+comments", "+answer"), extra...)
	args = append(args, name, qtype)
	out, err := run(args...)
	if err != nil {
		return DigResult{Raw: string(out)}, fmt.Errorf("dig %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return parseDig(string(out))
}

// digServerArgs are dig's arguments that ask server: "@IP", "-p", port.
func digServerArgs(server string) ([]string, error) {
	ap, err := digServer(server)
	if err != nil {
		return nil, err
	}
	return []string{"@" + ap.Addr().String(), "-p", strconv.Itoa(int(ap.Port()))}, nil
}

// digServer parses server as "IP:port" ("[IPv6]:port" for IPv6) or a bare
// IP on port 53; splitting on the first ':' would cut an IPv6 address.
func digServer(server string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(server); err == nil {
		return ap, nil
	}
	ip, err := netip.ParseAddr(server)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("dig server %q: want IP, IP:port or [IPv6]:port", server)
	}
	return netip.AddrPortFrom(ip, 53), nil
}

func parseDig(out string) (DigResult, error) {
	r := DigResult{Raw: out}
	m := statusRE.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("dig printed no response header:\n%s", out)
	}
	r.Status = m[1]
	if f := flagsRE.FindStringSubmatch(out); f != nil {
		r.Flags = strings.Fields(f[1])
	}
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 5 {
			return r, fmt.Errorf("unexpected answer line %q", line)
		}
		ttl, err := strconv.ParseUint(fields[1], 10, 32)
		if err != nil {
			return r, fmt.Errorf("bad TTL in %q", line)
		}
		r.Answers = append(r.Answers, RR{Name: fields[0], TTL: uint32(ttl), Type: fields[3], Data: strings.Join(fields[4:], " ")})
	}
	return r, nil
}
