package tunnelnodes

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// HostEntry is one address-to-name mapping of the records text.
type HostEntry struct {
	Addr netip.Addr
	// Name is lower case, without a trailing dot.
	Name string
}

// LineError describes a line of the records text that was skipped.
type LineError struct {
	Line   int // 1-based
	Reason string
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// ParseHosts reads text in the hosts-file grammar: one address followed by one
// or more names per line, '#' starting a comment, blank lines ignored, LF or
// CRLF line ends. Lines (or names) that cannot be used are reported in skipped;
// everything usable is returned in order of appearance, so equal input always
// gives equal output.
func ParseHosts(text string) (entries []HostEntry, skipped []LineError) {
	return parseHosts(text, nil)
}

// parseHosts is ParseHosts that also skips the names keep (nil: none)
// returns an error for.
func parseHosts(text string, keep func(name string) error) (entries []HostEntry, skipped []LineError) {
	lineNo := 0
	for len(text) > 0 {
		lineNo++
		var line string
		line, text, _ = strings.Cut(text, "\n")
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		addr, err := parseAddr(fields[0])
		if err != nil {
			skipped = append(skipped, LineError{Line: lineNo, Reason: err.Error()})
			continue
		}
		if len(fields) == 1 {
			skipped = append(skipped, LineError{Line: lineNo, Reason: fmt.Sprintf("address %s has no name", addr)})
			continue
		}
		for _, name := range fields[1:] {
			normalized, err := NormalizeName(name)
			if err == nil && keep != nil {
				err = keep(normalized)
			}
			if err != nil {
				skipped = append(skipped, LineError{Line: lineNo, Reason: err.Error()})
				continue
			}
			entries = append(entries, HostEntry{Addr: addr, Name: normalized})
		}
	}
	return entries, skipped
}

// parseAddr accepts IPv4 and IPv6 literals; an IPv6 zone is dropped (as
// CoreDNS's hosts plugin does) and IPv4-mapped IPv6 is taken as IPv4.
func parseAddr(s string) (netip.Addr, error) {
	if i := strings.IndexByte(s, '%'); i >= 0 {
		s = s[:i]
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", truncate(s))
	}
	return addr.Unmap(), nil
}

// RenderHosts writes entries in the upstream byte format: "IP\tname" lines,
// sorted as strings, '\n'-joined, no trailing newline. Duplicate lines are
// written once.
func RenderHosts(entries []HostEntry) string {
	lines := make([]string, 0, len(entries))
	for _, e := range entries {
		lines = append(lines, e.Addr.String()+"\t"+e.Name)
	}
	sort.Strings(lines)
	out := lines[:0]
	for i, l := range lines {
		if i == 0 || l != lines[i-1] {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// RenderedSize is the length of RenderHosts(entries) without building it
// (exact for distinct entries, an upper bound otherwise): whether records fit
// in a ConfigMap is known before they are rendered.
func RenderedSize(entries []HostEntry) int {
	if len(entries) == 0 {
		return 0
	}
	n := len(entries) - 1 // the line ends
	for _, e := range entries {
		n += len(e.Addr.String()) + 1 + len(e.Name)
	}
	return n
}

// NormalizeName validates a host name as a DNS name (RFC 1123 labels of
// letters, digits, '-' and '_', at most 63 bytes each, 253 in all) and returns
// it lower case without a trailing dot.
func NormalizeName(name string) (string, error) {
	n := strings.TrimSuffix(name, ".")
	if n == "" || len(n) > 253 {
		return "", fmt.Errorf("name %q: length must be 1..253", truncate(name))
	}
	labelLen := 0
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c == '.':
			if labelLen == 0 {
				return "", fmt.Errorf("name %q: empty label", truncate(name))
			}
			labelLen = 0
			continue
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return "", fmt.Errorf("name %q: invalid character %q", truncate(name), c)
		}
		labelLen++
		if labelLen > 63 {
			return "", fmt.Errorf("name %q: label longer than 63 bytes", truncate(name))
		}
	}
	if labelLen == 0 {
		return "", fmt.Errorf("name %q: empty label", truncate(name))
	}
	return strings.ToLower(n), nil
}

// truncate keeps log lines bounded when the input is hostile.
func truncate(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
