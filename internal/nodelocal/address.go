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
// creates does the same; lo is there on every kernel. added is false when
// the address was already there.
func EnsureAddress(link string, addr netip.Addr) (added bool, err error) {
	l, a, err := linkAddr(link, addr)
	if err != nil {
		return false, err
	}
	err = netlink.AddrAdd(l, a)
	if errors.Is(err, syscall.EEXIST) {
		return false, nil
	}
	if err != nil {
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
	return l, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}}, nil
}
