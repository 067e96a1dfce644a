package steps

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
)

// dnsControllerOn is whether yurt-tunnel-server runs its DNS controller
// with this command line, as its pflag flag set reads it (its other flags
// are not declared here).
func dnsControllerOn(t *testing.T, c *corev1.Container) bool {
	t.Helper()
	fs := pflag.NewFlagSet("yurt-tunnel-server", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	on := fs.Bool(strings.TrimPrefix(dnsControllerFlag, "--"), true, "")
	argv := slices.Concat(c.Command, c.Args)
	if len(c.Command) > 0 {
		argv = argv[1:] // the binary
	}
	if err := fs.Parse(argv); err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return *on
}

// TestTunnelDNSFlag: whatever form --enable-dns-controller has, install's
// value turns the controller off as pflag reads it, a second install
// changes nothing, and revert gives back the command line exactly.
func TestTunnelDNSFlag(t *testing.T) {
	for _, tc := range []struct {
		name          string
		command, args []string
		unchanged     bool // already off: install leaves it
	}{
		{name: "absent", args: []string{"--bind-address=$(NODE_IP)", "--v=2"}},
		{name: "true", args: []string{"--bind-address=$(NODE_IP)", "--enable-dns-controller=true", "--v=2"}},
		{name: "alone, another flag next", args: []string{"--enable-dns-controller", "--v=2"}},
		{name: "alone, last", args: []string{"--v=2", "--enable-dns-controller"}},
		{name: "1", args: []string{"--enable-dns-controller=1"}},
		{name: "a value pflag refuses", args: []string{"--enable-dns-controller=yes"}},
		{name: "off last, on first", args: []string{"--enable-dns-controller", "--enable-dns-controller=false"}, unchanged: true},
		{name: "on last, off first", args: []string{"--enable-dns-controller=false", "--enable-dns-controller=true"}},
		{name: "in the command", command: []string{"yurt-tunnel-server", "--enable-dns-controller=true"}, args: []string{"--v=2"}},
		{name: "false", args: []string{"--enable-dns-controller=false"}, unchanged: true},
		{name: "False", args: []string{"--enable-dns-controller=False"}, unchanged: true},
		{name: "0", command: []string{"yurt-tunnel-server", "--enable-dns-controller=0"}, unchanged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Command: slices.Clone(tc.command), Args: slices.Clone(tc.args)}
			_, before, _, existed := findFlag(c, dnsControllerFlag, true)
			next := disableDNSController(before, existed)
			if unchanged := existed && next == before; unchanged != tc.unchanged {
				t.Fatalf("disableDNSController(%q, %v) = %q: unchanged %v, want %v", before, existed, next, unchanged, tc.unchanged)
			}
			setFlag(c, dnsControllerFlag, true, next, true)
			if dnsControllerOn(t, c) {
				t.Errorf("after install %q %q: the DNS controller still runs", c.Command, c.Args)
			}
			if _, v, _, found := findFlag(c, dnsControllerFlag, true); !found || disableDNSController(v, found) != v {
				t.Errorf("after install %q %q: a second install would change %q", c.Command, c.Args, v)
			}
			setFlag(c, dnsControllerFlag, true, before, existed)
			if !slices.Equal(c.Command, tc.command) || !slices.Equal(c.Args, tc.args) {
				t.Errorf("after revert %q %q, want %q %q", c.Command, c.Args, tc.command, tc.args)
			}
		})
	}
}
