// Package takeover is a CoreDNS plugin: a server started on the address of a
// running one (both with SO_REUSEPORT, as CoreDNS listens) takes every new
// query from it, so the older one can exit without losing any.
package takeover

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// secondSocket is the classic BPF program the sockets' SO_REUSEPORT group
// runs for each new datagram or connection: it returns the index of the
// socket to hand it to. The kernel keeps a group's sockets in the order
// they bound, moving the last into the place of one that closes, and
// hashes as usual when the index is out of range. So with two sockets
// the second (the newer server) gets everything and the first only drains
// what it has already queued; with one, it is hashed to that one. The
// program belongs to the group and stays as long as a socket of it does.
var secondSocket = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 1}}

// listenAddrs are the addresses a server block listens on: its bind
// addresses, or the unspecified ones of both families without bind.
func listenAddrs(hosts []string, port string) ([]netip.AddrPort, error) {
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", port, err)
	}
	var addrs []netip.AddrPort
	for _, h := range hosts {
		if h == "" {
			addrs = append(addrs, netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(p)), netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(p)))
			continue
		}
		a, err := netip.ParseAddr(h)
		if err != nil {
			return nil, fmt.Errorf("listen address %q: %w", h, err)
		}
		addrs = append(addrs, netip.AddrPortFrom(a.Unmap(), uint16(p)))
	}
	return addrs, nil
}

// steerToSecond attaches secondSocket to the group of each of this
// process's UDP sockets and TCP listeners bound to addrs with SO_REUSEPORT,
// and says which it found ("udp 169.254.20.10:53").
func steerToSecond(addrs []netip.AddrPort) ([]string, error) {
	fds, err := reusePortSockets()
	if err != nil {
		return nil, err
	}
	var steered []string
	for _, s := range fds {
		if !slices.Contains(addrs, s.addr) {
			continue
		}
		prog := unix.SockFprog{Len: uint16(len(secondSocket)), Filter: &secondSocket[0]}
		if err := unix.SetsockoptSockFprog(s.fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &prog); err != nil {
			if p, _ := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); p == unix.IPPROTO_MPTCP {
				err = fmt.Errorf("%w: an MPTCP listener takes no SO_REUSEPORT program; run the server with GODEBUG=multipathtcp=0", err)
			}
			return steered, fmt.Errorf("attaching the program to %s %s: %w", s.network, s.addr, err)
		}
		steered = append(steered, s.network+" "+s.addr.String())
	}
	if len(steered) == 0 {
		return nil, fmt.Errorf("no socket of this process is bound to %v with SO_REUSEPORT", addrs)
	}
	return steered, nil
}

type socket struct {
	fd      int
	network string
	addr    netip.AddrPort
}

// reusePortSockets are this process's UDP sockets and TCP listeners with
// SO_REUSEPORT, found in /proc/self/fd: CoreDNS does not hand a plugin its
// listeners, and its servers keep them open while they run.
func reusePortSockets() ([]socket, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	var found []socket
	for _, e := range entries {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(link, "socket:") {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT); err != nil || on == 0 {
			continue
		}
		typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
		if err != nil {
			continue
		}
		var network string
		switch typ {
		case unix.SOCK_DGRAM:
			network = "udp"
		case unix.SOCK_STREAM:
			// Accepted connections inherit SO_REUSEPORT but belong to no group.
			if listening, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || listening == 0 {
				continue
			}
			network = "tcp"
		default:
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue
		}
		var addr netip.AddrPort
		switch sa := sa.(type) {
		case *unix.SockaddrInet4:
			addr = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
		case *unix.SockaddrInet6:
			addr = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
		default:
			continue
		}
		found = append(found, socket{fd: fd, network: network, addr: addr})
	}
	return found, nil
}
