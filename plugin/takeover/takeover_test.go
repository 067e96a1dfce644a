// The servers' TCP listeners are plain TCP, as in coredns-yurt.
//
//go:debug multipathtcp=0
package takeover

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"

	"golang.org/x/sys/unix"
)

// listenConfig listens as CoreDNS does (plugin/pkg/reuseport).
var listenConfig = net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
	if err != nil {
		return err
	}
	return serr
}}

const sends = 64

// freeAddr is a loopback address on a port reserved for this test process.
// Not port 0: a UDP socket with SO_REUSEPORT bound to port 0 may be put in
// another process's group (a CoreDNS of the tests running beside these),
// and the program would then steer that server's queries too.
func freeAddr(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t)) }

// Two UDP servers share a loopback port. Before the program, new senders
// are hashed over both; after the newer one's takeover, every datagram goes
// to it; once the older one has closed, still to it.
func TestSteerUDP(t *testing.T) {
	addr := freeAddr(t)
	older, err := listenConfig.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close()
	newer, err := listenConfig.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()

	if got := receivedBy(t, addr, older, newer); got[0] == 0 || got[1] == 0 {
		t.Fatalf("before the takeover %d datagrams reached the older server and %d the newer: the kernel should hash them over both", got[0], got[1])
	}
	steered, err := steerToSecond([]netip.AddrPort{netip.MustParseAddrPort(addr)})
	if err != nil || len(steered) != 2 { // both servers' sockets, found in this process
		t.Fatalf("steerToSecond: %v %v", steered, err)
	}
	if got := receivedBy(t, addr, older, newer); got[0] != 0 || got[1] != sends {
		t.Errorf("after the takeover %d datagrams reached the older server and %d the newer, want 0 and %d", got[0], got[1], sends)
	}
	older.Close()
	if got := receivedBy(t, addr, newer); got[0] != sends {
		t.Errorf("after the older server closed %d of %d datagrams reached the newer", got[0], sends)
	}
}

// receivedBy sends sends datagrams to addr, each from a new port, and
// counts those each server read.
func receivedBy(t *testing.T, addr string, servers ...net.PacketConn) []int {
	t.Helper()
	for range sends {
		c, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	got := make([]int, len(servers))
	buf := make([]byte, 16)
	for i, s := range servers {
		for {
			s.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, _, err := s.ReadFrom(buf); err != nil {
				break
			}
			got[i]++
		}
	}
	return got
}

// TCP listeners: after the takeover every connection is queued on the newer.
func TestSteerTCP(t *testing.T) {
	addr := freeAddr(t)
	older, err := listenConfig.Listen(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close()
	newer, err := listenConfig.Listen(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	if _, err := steerToSecond([]netip.AddrPort{netip.MustParseAddrPort(addr)}); err != nil {
		t.Fatal(err)
	}
	for range sends {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if n := accepted(older); n != 0 {
		t.Errorf("%d connections were queued on the older listener, want 0", n)
	}
	if n := accepted(newer); n != sends {
		t.Errorf("%d of %d connections were queued on the newer listener", n, sends)
	}
}

func accepted(l net.Listener) int {
	n := 0
	for {
		l.(*net.TCPListener).SetDeadline(time.Now().Add(200 * time.Millisecond))
		c, err := l.Accept()
		if err != nil {
			return n
		}
		c.Close()
		n++
	}
}

func TestSteerNothingBound(t *testing.T) {
	if _, err := steerToSecond([]netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:1")}); err == nil {
		t.Error("no error with no socket bound to the address")
	}
}

func TestListenAddrs(t *testing.T) {
	tests := []struct {
		hosts   []string
		port    string
		want    []string
		wantErr bool
	}{
		{hosts: []string{"169.254.20.10", "fd84:5bd1:ae3::10"}, port: "53", want: []string{"169.254.20.10:53", "[fd84:5bd1:ae3::10]:53"}},
		{hosts: []string{""}, port: "1053", want: []string{"0.0.0.0:1053", "[::]:1053"}},
		{hosts: []string{"::ffff:127.0.0.1"}, port: "53", want: []string{"127.0.0.1:53"}},
		{hosts: []string{"eth0"}, port: "53", wantErr: true},
		{hosts: []string{""}, port: "70000", wantErr: true},
	}
	for _, tc := range tests {
		got, err := listenAddrs(tc.hosts, tc.port)
		if (err != nil) != tc.wantErr {
			t.Errorf("listenAddrs(%q, %q): error %v, want error %v", tc.hosts, tc.port, err, tc.wantErr)
			continue
		}
		var s []string
		for _, a := range got {
			s = append(s, a.String())
		}
		if !tc.wantErr && !slices.Equal(s, tc.want) {
			t.Errorf("listenAddrs(%q, %q) = %v, want %v", tc.hosts, tc.port, s, tc.want)
		}
	}
}
