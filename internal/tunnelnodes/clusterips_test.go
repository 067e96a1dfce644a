package tunnelnodes

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseClusterIPs(t *testing.T) {
	for _, tc := range []struct {
		value, want string
	}{
		{"", "[]"},
		{"10.96.0.9", "[10.96.0.9]"},
		{"10.96.0.9,fd00:10:96::9", "[10.96.0.9 fd00:10:96::9]"},
		{" 10.96.0.9 , fd00:10:96::9 ", "[10.96.0.9 fd00:10:96::9]"},
		// Bad entries are ignored, the good ones kept.
		{"None,10.96.0.9,,x", "[10.96.0.9]"},
		{"fe80::1%eth0,10.96.0.9", "[10.96.0.9]"},
		{"::ffff:10.96.0.9", "[10.96.0.9]"},
		{"10.96.0.9,10.96.0.9", "[10.96.0.9]"},
		// Only the first MaxClusterIPs entries are read.
		{strings.Repeat("x,", MaxClusterIPs) + "10.96.0.9", "[]"},
		{strings.Repeat("x,", MaxClusterIPs-1) + "10.96.0.9,10.96.0.10", "[10.96.0.9]"},
	} {
		if got := fmt.Sprint(ParseClusterIPs(tc.value)); got != tc.want {
			t.Errorf("ParseClusterIPs(%q) = %s, want %s", tc.value, got, tc.want)
		}
	}
}

func TestServiceClusterIPs(t *testing.T) {
	svc := func(ip string, ips ...string) *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: ips}}
	}
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want string
	}{
		{"missing", nil, "[]"},
		{"headless", svc("None", "None"), "[]"},
		{"single-stack", svc("10.96.0.9", "10.96.0.9"), "[10.96.0.9]"},
		{"dual-stack", svc("10.96.0.9", "10.96.0.9", "fd00:10:96::9"), "[10.96.0.9 fd00:10:96::9]"},
		{"IPv6 primary", svc("fd00:10:96::9", "fd00:10:96::9", "10.96.0.9"), "[fd00:10:96::9 10.96.0.9]"},
		{"only spec.clusterIP", svc("10.96.0.9"), "[10.96.0.9]"},
	} {
		got := ServiceClusterIPs(tc.svc)
		if fmt.Sprint(got) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, got, tc.want)
		}
		if back := ParseClusterIPs(FormatClusterIPs(got)); fmt.Sprint(back) != tc.want {
			t.Errorf("%s: the annotation round trip gives %v", tc.name, back)
		}
	}
}

// FuzzParseClusterIPs: any annotation value gives at most MaxClusterIPs
// distinct valid addresses without a zone, and formatting them parses back
// to the same list.
//
// Seeds: testdata/fuzz/FuzzParseClusterIPs.
func FuzzParseClusterIPs(f *testing.F) {
	f.Fuzz(func(t *testing.T, value string) {
		got := ParseClusterIPs(value)
		if len(got) > MaxClusterIPs {
			t.Fatalf("%d addresses, over the bound", len(got))
		}
		seen := map[netip.Addr]bool{}
		for _, a := range got {
			if !a.IsValid() || a.Zone() != "" || a.Is4In6() || seen[a] {
				t.Fatalf("bad or repeated address %v in %v", a, got)
			}
			seen[a] = true
		}
		if back := ParseClusterIPs(FormatClusterIPs(got)); fmt.Sprint(back) != fmt.Sprint(got) {
			t.Fatalf("round trip %v -> %v", got, back)
		}
	})
}
