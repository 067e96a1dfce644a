package nodelocal

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// EnsureAddress puts addr/32 (or /128) on the link (lo): the node then
// delivers packets to addr locally, from its own processes and from its
// pods, with no DNAT. The dummy interface upstream NodeLocal DNSCache
// creates does the same; lo is there on every kernel. The address has host
// scope, so the node never picks it as the source of its own connections:
// a route without a preferred source (a Service CIDR routed through a link
// with no address) would otherwise get it, and those packets, untracked,
// would miss kube-proxy's DNAT. The kernel has no host scope for IPv6 (it
// derives an IPv6 address's scope from the address), so an IPv6 address is
// added deprecated instead (preferred lifetime 0, valid forever): RFC 6724's
// rule 3 then never picks it as a source while the node has another. added
// is false when it was already there.
func EnsureAddress(link string, addr netip.Addr) (added bool, err error) {
	l, a, err := linkAddr(link, addr)
	if err != nil {
		return false, err
	}
	existing, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return false, fmt.Errorf("addresses of %s: %w", link, err)
	}
	for _, e := range existing {
		if !e.IP.Equal(a.IP) {
			continue
		}
		// An IPv6 address reads back with the kernel's scope, never ours:
		// comparing it would delete and re-add the address under a running
		// cache on every call.
		if addr.Is6() || e.Scope == a.Scope {
			return false, nil
		}
		// Another scope (an earlier version's global one): the kernel
		// does not change an address's scope in place.
		if err := netlink.AddrDel(l, &e); err != nil {
			return false, fmt.Errorf("removing %s (scope %d) from %s: %w", e.IPNet, e.Scope, link, err)
		}
	}
	add := netlink.AddrAdd
	if addr.Is6() {
		add = addDeprecated6
	}
	if err := add(l, a); err != nil {
		return false, fmt.Errorf("adding %s to %s: %w", a.IPNet, link, err)
	}
	return true, nil
}

// addDeprecated6 adds the IPv6 address a with no duplicate address
// detection (it is the node's own, and would otherwise be tentative, unable
// to bind, for a second or two), valid forever and preferred for 0 seconds.
// netlink.AddrAdd cannot say that on 32-bit platforms (linux/arm/v7): its
// lifetimes are ints, and "forever" is 0xffffffff.
func addDeprecated6(l netlink.Link, a *netlink.Addr) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	msg := nl.NewIfAddrmsg(unix.AF_INET6)
	msg.Index = uint32(l.Attrs().Index)
	msg.Prefixlen = 128
	msg.Flags = unix.IFA_F_NODAD
	req.AddData(msg)
	req.AddData(nl.NewRtAttr(unix.IFA_LOCAL, a.IP.To16()))
	req.AddData(nl.NewRtAttr(unix.IFA_ADDRESS, a.IP.To16()))
	lifetimes := nl.IfaCacheInfo{IfaCacheinfo: unix.IfaCacheinfo{Valid: math.MaxUint32, Prefered: 0}}
	req.AddData(nl.NewRtAttr(unix.IFA_CACHEINFO, lifetimes.Serialize()))
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// RemoveAddress takes addr off the link; removed is false when it was not
// there.
func RemoveAddress(link string, addr netip.Addr) (removed bool, err error) {
	l, a, err := linkAddr(link, addr)
	if err != nil {
		return false, err
	}
	err = netlink.AddrDel(l, a)
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("removing %s from %s: %w", a.IPNet, link, err)
	}
	return true, nil
}

func linkAddr(link string, addr netip.Addr) (netlink.Link, *netlink.Addr, error) {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return nil, nil, fmt.Errorf("interface %s: %w", link, err)
	}
	ip := net.IP(addr.AsSlice())
	return l, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}, Scope: int(netlink.SCOPE_HOST)}, nil
}
