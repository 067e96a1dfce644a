// Command coredns-yurt is stock CoreDNS, with every stock plugin in the stock
// order, plus the yurthosts plugin placed immediately before hosts.
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/yurtdns/yurtdns/internal/version"
	_ "github.com/yurtdns/yurtdns/plugin/yurthosts"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every stock plugin
	"github.com/coredns/coredns/coremain"
)

// withYurthosts returns a copy of the stock directive list with yurthosts
// inserted before hosts, so it answers node names before a hosts block and
// before kubernetes and forward see the query.
func withYurthosts(stock []string) ([]string, error) {
	i := slices.Index(stock, "hosts")
	if i < 0 {
		return nil, fmt.Errorf("stock directive list has no hosts directive")
	}
	return slices.Insert(slices.Clone(stock), i, "yurthosts"), nil
}

func main() {
	directives, err := withYurthosts(dnsserver.Directives)
	if err == nil {
		err = dnsserver.SetDirectives(directives)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "coredns-yurt: %v\n", err)
		os.Exit(1)
	}
	caddy.AppVersion = coremain.CoreVersion + "+yurthosts-" + version.Version
	coremain.Run()
}
