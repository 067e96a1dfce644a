package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/nodelocal/netnstest"

	"github.com/vishvananda/netlink"
)

// runNodeLocalDNS runs `node-local-dns args...` and returns its output.
func runNodeLocalDNS(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"node-local-dns"}, args...))
	err := root.Execute()
	return out.String(), err
}

// Two addresses of one family are refused before anything is touched:
// each family's NOTRACK table is written for one address.
func TestNodeLocalDNSAddressesOnePerFamily(t *testing.T) {
	for _, args := range [][]string{
		{"setup", "--address", "169.254.20.10", "--address", "169.254.20.11"},
		{"teardown", "--address", "169.254.20.10,fd84:5bd1:ae3::10,fd84:5bd1:ae3::11"},
		{"switch-kubelet", "--address", "not-an-address"},
	} {
		if _, err := runNodeLocalDNS(t, args...); err == nil || !strings.Contains(err.Error(), "--address") {
			t.Errorf("%v: %v, want an --address error", args, err)
		}
	}
}

// setup and teardown with one address of each family, in a network
// namespace of the test's own (root only): each address on lo, each
// family's table written, then both gone; with the default address alone
// the output is what it was before IPv6.
func TestNodeLocalDNSSetupTeardownBothFamilies(t *testing.T) {
	netnstest.Run(t, func(netlink.Link) {
		both := []string{"--address", "169.254.20.10", "--address", "fd84:5bd1:ae3::10"}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{append([]string{"setup"}, both...), "169.254.20.10 on lo: added\n" +
				"traffic to and from 169.254.20.10: not tracked (nftables table ip yurtdns-node-local)\n" +
				"fd84:5bd1:ae3::10 on lo: added\n" +
				"traffic to and from fd84:5bd1:ae3::10: not tracked (nftables table ip6 yurtdns-node-local)\n"},
			{append([]string{"setup"}, both...), "169.254.20.10 on lo: already there\n" +
				"traffic to and from 169.254.20.10: not tracked (nftables table ip yurtdns-node-local)\n" +
				"fd84:5bd1:ae3::10 on lo: already there\n" +
				"traffic to and from fd84:5bd1:ae3::10: not tracked (nftables table ip6 yurtdns-node-local)\n"},
			{append([]string{"teardown"}, both...), "169.254.20.10 on lo: removed\n" +
				"nftables table ip yurtdns-node-local: removed\n" +
				"fd84:5bd1:ae3::10 on lo: removed\n" +
				"nftables table ip6 yurtdns-node-local: removed\n"},
			{append([]string{"teardown"}, both...), "169.254.20.10 on lo: not there\n" +
				"nftables table ip yurtdns-node-local: not there\n" +
				"fd84:5bd1:ae3::10 on lo: not there\n" +
				"nftables table ip6 yurtdns-node-local: not there\n"},
			// The default (an earlier install's Jobs and DaemonSets pass one
			// --address or none): the output of before.
			{[]string{"setup"}, "169.254.20.10 on lo: added\n" +
				"traffic to and from 169.254.20.10: not tracked (nftables table yurtdns-node-local)\n"},
			{[]string{"teardown", "--address", "169.254.20.10"}, "169.254.20.10 on lo: removed\n" +
				"nftables table yurtdns-node-local: removed\n"},
			// An IPv6-only cluster's one address: the table named with its
			// family (nft's default is ip).
			{[]string{"setup", "--address", "fd84:5bd1:ae3::10"}, "fd84:5bd1:ae3::10 on lo: added\n" +
				"traffic to and from fd84:5bd1:ae3::10: not tracked (nftables table ip6 yurtdns-node-local)\n"},
			{[]string{"teardown", "--address", "fd84:5bd1:ae3::10"}, "fd84:5bd1:ae3::10 on lo: removed\n" +
				"nftables table ip6 yurtdns-node-local: removed\n"},
		} {
			out, err := runNodeLocalDNS(t, tc.args...)
			if err != nil {
				t.Fatalf("%v: %v\n%s", tc.args, err, out)
			}
			if out != tc.want {
				t.Errorf("%v:\n%s\nwant:\n%s", tc.args, out, tc.want)
			}
		}
	})
}
