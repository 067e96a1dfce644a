package nodelocal

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
)

// EnsureAddress puts addr/32 (or /128) on the link (lo): the node then
// delivers packets to addr locally, from its own processes and from its
// pods, with no DNAT. The dummy interface upstream NodeLocal DNSCache
// creates does the same; lo is there on every kernel. The address has host
// scope, so the node never picks it as the source of its own connections:
// a route without a preferred source (a Service CIDR routed through a link
// with no address) would otherwise get it, and those packets, untracked,
// would miss kube-proxy's DNAT. added is false when it was already there.
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
		if e.Scope == a.Scope {
			return false, nil
		}
		// Another scope (an earlier version's global one): the kernel
		// does not change an address's scope in place.
		if err := netlink.AddrDel(l, &e); err != nil {
			return false, fmt.Errorf("removing %s (scope %d) from %s: %w", e.IPNet, e.Scope, link, err)
		}
	}
	if err := netlink.AddrAdd(l, a); err != nil {
		return false, fmt.Errorf("adding %s to %s: %w", a.IPNet, link, err)
	}
	return true, nil
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
