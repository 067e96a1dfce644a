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

// watchListEnv is client-go's switch for its WatchListClient feature gate,
// read once, on the first check of any client-go gate.
const watchListEnv = "KUBE_FEATURE_WatchListClient"

// defaultWatchListOff makes the whole server's reflectors (the kubernetes
// plugin's included) LIST then WATCH unless the operator chose otherwise.
// client-go >= 0.35 starts them with a watch-list, and yurthub, serving an
// edge node from its cache while the cloud is away, answers that with 200
// and nothing, so a restarted server would never be ready (openyurt#880).
// It must run before any client is built.
func defaultWatchListOff() {
	if _, set := os.LookupEnv(watchListEnv); !set {
		_ = os.Setenv(watchListEnv, "false")
	}
}

func main() {
	defaultWatchListOff()
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
