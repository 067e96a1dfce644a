// Package netnstest runs a test's network changes in a network namespace of
// its own, so the machine's addresses and nftables tables are never touched.
package netnstest

import (
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Run runs f on a locked thread in a new network namespace with its lo up,
// and skips t unless it runs as root (creating a namespace needs it).
func Run(t testing.TB, f func(lo netlink.Link)) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	runtime.LockOSThread()
	origin, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(origin); err != nil {
			t.Fatalf("back to the original network namespace: %v", err)
		}
		// Only a thread back in its own namespace may run other goroutines.
		runtime.UnlockOSThread()
		ns.Close()
		origin.Close()
	}()
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	f(lo)
}
