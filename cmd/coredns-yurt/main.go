// Command coredns-yurt is stock CoreDNS, with every stock plugin in the stock
// order, plus the yurthosts plugin placed immediately before hosts and the
// takeover plugin immediately after bind.
//
// Listeners are plain TCP, not MPTCP (Go's default for listeners since
// 1.24): the kernel attaches no SO_REUSEPORT program to an MPTCP socket,
// which takeover needs, and DNS gains nothing from multipath.
//
//go:debug multipathtcp=0
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/yurtdns/yurtdns/internal/version"
	_ "github.com/yurtdns/yurtdns/plugin/takeover"
	_ "github.com/yurtdns/yurtdns/plugin/yurthosts"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every stock plugin
	"github.com/coredns/coredns/coremain"
)

// withPlugins returns a copy of the stock directive list with yurthosts
// inserted before hosts, so it answers node names before a hosts block and
// before kubernetes and forward see the query, and takeover after bind
// (it serves no query; it reads the addresses bind sets).
func withPlugins(stock []string) ([]string, error) {
	hosts, bind := slices.Index(stock, "hosts"), slices.Index(stock, "bind")
	if hosts < 0 || bind < 0 || bind > hosts {
		return nil, fmt.Errorf("stock directive list has no bind before hosts")
	}
	list := slices.Insert(slices.Clone(stock), hosts, "yurthosts")
	return slices.Insert(list, bind+1, "takeover"), nil
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
	directives, err := withPlugins(dnsserver.Directives)
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
