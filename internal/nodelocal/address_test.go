package nodelocal

import (
	"bytes"
	"math"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/nodelocal/netnstest"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// TestAddressAndNotrack: in a fresh network namespace, the address goes on
// lo with host scope (and an earlier global one is replaced), is never the
// source the node picks for a Service CIDR routed through an interface
// without an address, and setup and its undo are idempotent.
func TestAddressAndNotrack(t *testing.T) {
	netnstest.Run(t, func(lo netlink.Link) {
		// A Service CIDR routed through lo, which has no address of its
		// own in that range: the case the source selection gets wrong.
		_, svc, _ := net.ParseCIDR("10.96.0.0/12")
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: lo.Attrs().Index, Dst: svc}); err != nil {
			t.Fatal(err)
		}
		// An earlier version's global address first.
		global := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(Address.AsSlice()), Mask: net.CIDRMask(32, 32)}}
		if err := netlink.AddrAdd(lo, global); err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{true, false} {
			added, err := EnsureAddress("lo", Address)
			if err != nil || added != want {
				t.Fatalf("EnsureAddress #%d: added %v, %v; want added %v", i+1, added, err, want)
			}
		}
		addrs, err := netlink.AddrList(lo, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, a := range addrs {
			if a.IP.Equal(net.IP(Address.AsSlice())) {
				found++
				if a.Scope != int(netlink.SCOPE_HOST) {
					t.Errorf("%s has scope %d, want host", a.IPNet, a.Scope)
				}
			}
		}
		if found != 1 {
			t.Errorf("%s on lo %d times, want once", Address, found)
		}
		routes, err := netlink.RouteGet(net.ParseIP("10.96.0.1"))
		for _, r := range routes {
			if r.Src.Equal(net.IP(Address.AsSlice())) {
				t.Errorf("the node picks %s as the source towards 10.96.0.1", Address)
			}
		}
		t.Logf("route to 10.96.0.1: %v (%v)", routes, err)

		for i := range 2 {
			if err := EnsureNotrack(Address); err != nil {
				t.Fatalf("EnsureNotrack #%d: %v", i+1, err)
			}
		}
		c, err := nftables.New()
		if err != nil {
			t.Fatal(err)
		}
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		rules := 0
		for _, ch := range chains {
			if ch.Table.Name == NotrackTable {
				r, err := c.GetRules(ch.Table, ch)
				if err != nil {
					t.Fatal(err)
				}
				rules += len(r)
			}
		}
		if rules != 3 {
			t.Errorf("table %s has %d rules after two EnsureNotrack, want 3 (daddr in prerouting and output, saddr in output)", NotrackTable, rules)
		}
		for i, want := range []bool{true, false} {
			if removed, err := RemoveNotrack(Address); err != nil || removed != want {
				t.Errorf("RemoveNotrack #%d: removed %v, %v; want %v", i+1, removed, err, want)
			}
			if removed, err := RemoveAddress("lo", Address); err != nil || removed != want {
				t.Errorf("RemoveAddress #%d: removed %v, %v; want %v", i+1, removed, err, want)
			}
		}
	})
}

// TestAddress6: an IPv6 address goes on lo without DAD and deprecated
// (valid forever, preferred 0), so the node picks another source towards a
// Service CIDR; a second EnsureAddress leaves it alone (no delete and
// re-add, which would blink it under a running cache).
func TestAddress6(t *testing.T) {
	addr := netip.MustParseAddr("fd84:5bd1:ae3::10")
	netnstest.Run(t, func(lo netlink.Link) {
		// The node's own global address, and a Service CIDR routed
		// through a link that has no address in it.
		node := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("2001:db8:100::11"), Mask: net.CIDRMask(128, 128)}, Flags: unix.IFA_F_NODAD}
		if err := netlink.AddrAdd(lo, node); err != nil {
			t.Fatal(err)
		}
		_, svc, _ := net.ParseCIDR("2001:db8:96::/112")
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: lo.Attrs().Index, Dst: svc}); err != nil {
			t.Fatal(err)
		}

		updates := make(chan netlink.AddrUpdate, 16)
		done := make(chan struct{})
		defer close(done)
		if err := netlink.AddrSubscribe(updates, done); err != nil {
			t.Fatal(err)
		}
		if added, err := EnsureAddress("lo", addr); err != nil || !added {
			t.Fatalf("EnsureAddress #1: added %v, %v; want added", added, err)
		}
		if added, err := EnsureAddress("lo", addr); err != nil || added {
			t.Fatalf("EnsureAddress #2: added %v, %v; want not added", added, err)
		}
		// A marker after the second call: every update the calls caused
		// arrives before the marker's. The kernel may report the address
		// as new twice (seen here: on the add, and later from its DAD
		// work, nodad or not); a delete is what a running cache notices.
		marker := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("2001:db8:100::12"), Mask: net.CIDRMask(128, 128)}, Flags: unix.IFA_F_NODAD}
		if err := netlink.AddrAdd(lo, marker); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(5 * time.Second)
		for waiting := true; waiting; {
			select {
			case u := <-updates:
				switch {
				case u.LinkAddress.IP.Equal(marker.IP):
					waiting = false
				case u.LinkAddress.IP.Equal(net.IP(addr.AsSlice())) && !u.NewAddr:
					t.Errorf("%s was deleted from lo", addr)
				}
			case <-timeout:
				t.Fatal("no netlink update for the marker address within 5s")
			}
		}

		addrs, err := netlink.AddrList(lo, netlink.FAMILY_V6)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, a := range addrs {
			if !a.IP.Equal(net.IP(addr.AsSlice())) {
				continue
			}
			found++
			if a.Flags&unix.IFA_F_NODAD == 0 || a.Flags&unix.IFA_F_DEPRECATED == 0 || a.Flags&unix.IFA_F_PERMANENT == 0 {
				t.Errorf("%s has flags %#x, want nodad, deprecated and permanent", a.IPNet, a.Flags)
			}
			// uint32: a 32-bit int reads "forever" as -1.
			if a.PreferedLft != 0 || uint32(a.ValidLft) != math.MaxUint32 {
				t.Errorf("%s: preferred %d s, valid %d s; want 0 and forever", a.IPNet, a.PreferedLft, uint32(a.ValidLft))
			}
		}
		if found != 1 {
			t.Errorf("%s on lo %d times, want once", addr, found)
		}
		routes, err := netlink.RouteGet(net.ParseIP("2001:db8:96::1"))
		if err != nil || len(routes) == 0 {
			t.Fatalf("route to 2001:db8:96::1: %v %v", routes, err)
		}
		for _, r := range routes {
			if r.Src == nil || r.Src.Equal(net.IP(addr.AsSlice())) {
				t.Errorf("the node picks %v as the source towards 2001:db8:96::1, want one of its own addresses", r.Src)
			}
		}

		for i, want := range []bool{true, false} {
			if removed, err := RemoveAddress("lo", addr); err != nil || removed != want {
				t.Errorf("RemoveAddress #%d: removed %v, %v; want %v", i+1, removed, err, want)
			}
		}
	})
}

// TestSetupBothFamilies: the IPv4 and the IPv6 address each go on lo and
// get their own family's NOTRACK table (3 rules each, matching that
// address), and Teardown of one leaves the other family's alone.
func TestSetupBothFamilies(t *testing.T) {
	netnstest.Run(t, func(lo netlink.Link) {
		addrs := Addresses([]corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol})
		if err := OnePerFamily(addrs); err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if added, err := EnsureAddress("lo", a); err != nil || !added {
				t.Fatalf("EnsureAddress %s: added %v, %v", a, added, err)
			}
			if err := EnsureNotrack(a); err != nil {
				t.Fatalf("EnsureNotrack %s: %v", a, err)
			}
		}
		c, err := nftables.New()
		if err != nil {
			t.Fatal(err)
		}
		rulesOf := func(family nftables.TableFamily) (rules int, matches int, a netip.Addr) {
			chains, err := c.ListChainsOfTableFamily(family)
			if err != nil {
				t.Fatal(err)
			}
			a = Address
			if family == nftables.TableFamilyIPv6 {
				a = Address6
			}
			for _, ch := range chains {
				if ch.Table.Name != NotrackTable {
					continue
				}
				rs, err := c.GetRules(ch.Table, ch)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					rules++
					for _, e := range r.Exprs {
						if cmp, ok := e.(*expr.Cmp); ok && bytes.Equal(cmp.Data, a.AsSlice()) {
							matches++
						}
					}
				}
			}
			return rules, matches, a
		}
		for _, family := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
			if rules, matches, a := rulesOf(family); rules != 3 || matches != 3 {
				t.Errorf("family %d: table %s has %d rules, %d matching %s; want 3 and 3", family, NotrackTable, rules, matches, a)
			}
		}
		if a, tr, err := Teardown("lo", Address); err != nil || !a || !tr {
			t.Fatalf("Teardown %s: %v %v %v", Address, a, tr, err)
		}
		if rules, _, _ := rulesOf(nftables.TableFamilyIPv6); rules != 3 {
			t.Errorf("the IPv6 table has %d rules after the IPv4 teardown, want 3", rules)
		}
		v6, err := netlink.AddrList(lo, netlink.FAMILY_V6)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(v6, func(x netlink.Addr) bool { return x.IP.Equal(net.IP(Address6.AsSlice())) }) {
			t.Errorf("%s gone from lo after the IPv4 teardown", Address6)
		}
		if a, tr, err := Teardown("lo", Address6); err != nil || !a || !tr {
			t.Fatalf("Teardown %s: %v %v %v", Address6, a, tr, err)
		}
		if rules, _, _ := rulesOf(nftables.TableFamilyIPv6); rules != 0 {
			t.Errorf("the IPv6 table has %d rules after its teardown", rules)
		}
	})
}

func TestOnePerFamily(t *testing.T) {
	v4b := netip.MustParseAddr("169.254.20.11")
	for _, tc := range []struct {
		addrs []netip.Addr
		ok    bool
	}{
		{nil, false},
		{[]netip.Addr{Address}, true},
		{[]netip.Addr{Address6, Address}, true},
		{[]netip.Addr{Address, v4b}, false},
		{[]netip.Addr{Address6, Address6}, false},
	} {
		if err := OnePerFamily(tc.addrs); (err == nil) != tc.ok {
			t.Errorf("OnePerFamily(%v) = %v, want ok %v", tc.addrs, err, tc.ok)
		}
	}
}
