package tunnelnodes

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func entry(addr, name string) HostEntry {
	return HostEntry{Addr: netip.MustParseAddr(addr), Name: name}
}

func TestParseHosts(t *testing.T) {
	tests := []struct {
		name        string
		text        string
		want        []HostEntry
		wantSkipped []int // line numbers
	}{
		{name: "empty", text: ""},
		{name: "upstream format", text: "10.96.0.9\tedge-1\n192.168.0.2\tmaster-1",
			want: []HostEntry{entry("10.96.0.9", "edge-1"), entry("192.168.0.2", "master-1")}},
		{name: "comments blanks crlf and several names",
			text: "# header\r\n\r\n10.0.0.1 a b.example  # trailing\r\n  fd00::1   v6-node\r\n",
			want: []HostEntry{entry("10.0.0.1", "a"), entry("10.0.0.1", "b.example"), entry("fd00::1", "v6-node")}},
		{name: "case and trailing dot normalized", text: "10.0.0.1 WORKER-1.",
			want: []HostEntry{entry("10.0.0.1", "worker-1")}},
		{name: "ipv6 zone dropped, v4-mapped unmapped", text: "fe80::1%eth0 ll\n::ffff:10.0.0.7 mapped",
			want: []HostEntry{entry("fe80::1", "ll"), entry("10.0.0.7", "mapped")}},
		{name: "bad address skipped, rest kept", text: "300.1.1.1 bad\n10.0.0.1 good",
			want: []HostEntry{entry("10.0.0.1", "good")}, wantSkipped: []int{1}},
		{name: "address without name", text: "10.0.0.1\n10.0.0.2 b",
			want: []HostEntry{entry("10.0.0.2", "b")}, wantSkipped: []int{1}},
		{name: "invalid names skipped individually", text: "10.0.0.1 ok bad/name a..b " + strings.Repeat("x", 64),
			want: []HostEntry{entry("10.0.0.1", "ok")}, wantSkipped: []int{1, 1, 1}},
		{name: "duplicates kept in order", text: "10.0.0.2 n\n10.0.0.1 n",
			want: []HostEntry{entry("10.0.0.2", "n"), entry("10.0.0.1", "n")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped := ParseHosts(tc.text)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("entries = %v, want %v", got, tc.want)
			}
			var lines []int
			for _, s := range skipped {
				lines = append(lines, s.Line)
			}
			if !reflect.DeepEqual(lines, tc.wantSkipped) {
				t.Errorf("skipped lines = %v (%v), want %v", lines, skipped, tc.wantSkipped)
			}
		})
	}
}

// TestRenderHostsUpstreamBytes pins the byte format yurt-tunnel-server writes:
// lines sorted as strings (so "10.x" before "192.x", "edge-10" before "edge-2"),
// tab separated, no trailing newline.
func TestRenderHostsUpstreamBytes(t *testing.T) {
	got := RenderHosts([]HostEntry{
		entry("192.168.1.10", "master-1"),
		entry("10.96.0.9", "edge-2"),
		entry("10.96.0.9", "edge-10"),
		entry("10.96.0.9", "edge-2"),
	})
	want := "10.96.0.9\tedge-10\n10.96.0.9\tedge-2\n192.168.1.10\tmaster-1"
	if got != want {
		t.Errorf("RenderHosts = %q, want %q", got, want)
	}
	if RenderHosts(nil) != "" {
		t.Errorf("RenderHosts(nil) must be empty")
	}
}

func TestNormalizeNameLimits(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	long := strings.TrimSuffix(strings.Repeat(label63+".", 4), ".") // 255 bytes
	for name, ok := range map[string]bool{
		label63:       true,
		label63 + "b": false,
		long:          false,
		long[:253]:    true,
		"under_score": true,
		".":           false,
		"":            false,
		"a b":         false,
		"ünï":         false,
	} {
		if _, err := NormalizeName(name); (err == nil) != ok {
			t.Errorf("NormalizeName(%q) err = %v, want ok=%v", name, err, ok)
		}
	}
}

// FuzzParseHosts checks that any input parses without panic, that every
// returned name is valid, and that rendering the result and parsing it again
// is lossless.
// Seeds: testdata/fuzz/FuzzParseHosts.
func FuzzParseHosts(f *testing.F) {
	f.Fuzz(func(t *testing.T, text string) {
		entries, _ := ParseHosts(text)
		for _, e := range entries {
			if n, err := NormalizeName(e.Name); err != nil || n != e.Name {
				t.Fatalf("entry name %q not normalized: %v", e.Name, err)
			}
		}
		rendered := RenderHosts(entries)
		again, skipped := ParseHosts(rendered)
		if len(skipped) != 0 {
			t.Fatalf("rendered text has bad lines: %v", skipped)
		}
		if RenderHosts(again) != rendered {
			t.Fatalf("render is not stable")
		}
	})
}

func TestRenderedSize(t *testing.T) {
	a := netip.MustParseAddr("10.96.0.9")
	for _, entries := range [][]HostEntry{
		nil,
		{{a, "edge-1"}},
		{{a, "edge-1"}, {netip.MustParseAddr("fd00::1"), "cloud-1"}, {netip.MustParseAddr("192.168.0.10"), "master-1"}},
	} {
		if got, want := RenderedSize(entries), len(RenderHosts(entries)); got != want {
			t.Errorf("RenderedSize(%v) = %d, RenderHosts is %d bytes", entries, got, want)
		}
	}
}
