package yurthosts

import (
	"net"
	"net/netip"
	"slices"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// table is what one records object (the single ConfigMap, or a shard)
// answers; immutable once built.
type table struct {
	// hosts maps a lower-case FQDN to its addresses.
	hosts map[string]addrs
	// reverse maps a reverse name ("4.3.2.1.in-addr.arpa.") to FQDNs.
	reverse map[string][]string
}

type addrs struct{ v4, v6 []net.IP }

// tunnel says which entries are tunnel entries and what they answer.
type tunnel struct {
	// v4 and v6 are the Service's current ClusterIPs; invalid when the
	// Service is absent, headless, or lacks that family.
	v4, v6 netip.Addr
	// addrs are the addresses of tunnel entries: the ClusterIPs the records
	// were rendered for (the ConfigMap's annotation) and the current ones.
	// Both come from the objects as they are now, never from memory, so
	// every replica computes the same answers.
	addrs []netip.Addr
}

// newTunnel combines the annotated ClusterIPs with the current ones.
func newTunnel(annotated, current []netip.Addr) tunnel {
	t := tunnel{addrs: slices.Concat(annotated, current)}
	for _, a := range current {
		if a.Is4() && !t.v4.IsValid() {
			t.v4 = a
		} else if a.Is6() && !t.v6.IsValid() {
			t.v6 = a
		}
	}
	return t
}

func (t tunnel) present() bool { return t.v4.IsValid() || t.v6.IsValid() }

func (t tunnel) isTunnelIP(a netip.Addr) bool { return slices.Contains(t.addrs, a) }

// recordGroup is the entries of one records object and the tunnel they are
// remapped to: each object names the ClusterIPs it was rendered for.
type recordGroup struct {
	entries []tunnelnodes.HostEntry
	tun     tunnel
}

// parseRecords reads the text under key of cm (nil: none) and the ClusterIPs
// it was rendered for, combined with the Service's current ones. Lines and
// names that cannot be used are returned in skipped.
func parseRecords(cm *corev1.ConfigMap, key string, svc *corev1.Service) (recordGroup, []tunnelnodes.LineError) {
	var text, annotated string
	if cm != nil {
		text = cm.Data[key]
		annotated = cm.Annotations[tunnelnodes.TunnelClusterIPsAnnotation]
	}
	entries, skipped := tunnelnodes.ParseHosts(text)
	return recordGroup{entries, newTunnel(tunnelnodes.ParseClusterIPs(annotated), tunnelnodes.ServiceClusterIPs(svc))}, skipped
}

// newTable computes the table of g's entries. An entry whose address is a
// tunnel ClusterIP of g (annotated or current) answers the Service's
// current ClusterIP of each family and is never answered in reverse: that
// address is shared by every edge node. With the Service absent, entries
// are served as written.
// Addresses keep the order of the entries; repeats are dropped.
func newTable(g recordGroup) *table {
	n := len(g.entries)
	t := &table{
		hosts:   make(map[string]addrs, n),
		reverse: make(map[string][]string),
	}
	type pair struct {
		fqdn string
		addr netip.Addr
	}
	seen := make(map[pair]struct{}, n)
	// One net.IP per distinct address: the table's edge names share one.
	ips := make(map[netip.Addr]net.IP)
	// add reports whether the pair is new.
	add := func(fqdn string, a netip.Addr) bool {
		if _, dup := seen[pair{fqdn, a}]; dup {
			return false
		}
		seen[pair{fqdn, a}] = struct{}{}
		ip, ok := ips[a]
		if !ok {
			ip = net.IP(a.AsSlice())
			ips[a] = ip
		}
		h := t.hosts[fqdn]
		if a.Is4() {
			h.v4 = append(h.v4, ip)
		} else {
			h.v6 = append(h.v6, ip)
		}
		t.hosts[fqdn] = h
		return true
	}
	for _, e := range g.entries {
		fqdn := e.Name + "."
		switch {
		case !g.tun.isTunnelIP(e.Addr):
			if add(fqdn, e.Addr) {
				rev, _ := dns.ReverseAddr(e.Addr.String())
				t.reverse[rev] = append(t.reverse[rev], fqdn)
			}
		case g.tun.present():
			for _, a := range []netip.Addr{g.tun.v4, g.tun.v6} {
				if a.IsValid() {
					add(fqdn, a)
				}
			}
		default:
			add(fqdn, e.Addr)
		}
	}
	return t
}
