package tunnelnodes

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MaxClusterIPs bounds how many addresses ParseClusterIPs reads: the sync
// writes at most two (one per family); the bound keeps a hand-edited
// annotation from costing more than a few parses.
const MaxClusterIPs = 8

// ServiceClusterIPs returns the Service's ClusterIPs (IPv4 and IPv6 for a
// dual-stack Service), primary first; none when the Service is missing or
// headless.
func ServiceClusterIPs(svc *corev1.Service) []netip.Addr {
	if svc == nil {
		return nil
	}
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []netip.Addr
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(out, a) {
			out = append(out, a) // "None" (headless) and "" are skipped
		}
	}
	return out
}

// FormatClusterIPs renders the TunnelClusterIPsAnnotation value.
func FormatClusterIPs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// ParseClusterIPs reads a TunnelClusterIPsAnnotation value. It never fails:
// entries that are not IP addresses (or carry a zone) are ignored, spaces
// around entries are trimmed, repeats are dropped, and entries past the
// first MaxClusterIPs are not read. IPv4-mapped IPv6 is taken as IPv4, as in
// the records text.
func ParseClusterIPs(value string) []netip.Addr {
	var out []netip.Addr
	fields := strings.SplitN(value, ",", MaxClusterIPs+1)
	for _, f := range fields[:min(len(fields), MaxClusterIPs)] {
		a, err := netip.ParseAddr(strings.TrimSpace(f))
		if err != nil || a.Zone() != "" {
			continue
		}
		if a = a.Unmap(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
