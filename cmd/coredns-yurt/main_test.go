package main

import (
	"os"
	"slices"
	"testing"

	"github.com/coredns/coredns/core/dnsserver"
	clientfeatures "k8s.io/client-go/features"
)

// TestWatchListOffByDefault: with the variable unset, the gate reads off;
// it would read on if anything in the binary had checked a client-go gate
// before main (the variables are read once).
func TestWatchListOffByDefault(t *testing.T) {
	t.Setenv(watchListEnv, "")
	if err := os.Unsetenv(watchListEnv); err != nil {
		t.Fatal(err)
	}
	defaultWatchListOff()
	if got := os.Getenv(watchListEnv); got != "false" {
		t.Fatalf("%s = %q, want false", watchListEnv, got)
	}
	if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		t.Error("WatchListClient enabled: the variable was read before defaultWatchListOff")
	}
	t.Setenv(watchListEnv, "true")
	defaultWatchListOff()
	if got := os.Getenv(watchListEnv); got != "true" {
		t.Errorf("an operator's %s=true became %q", watchListEnv, got)
	}
}

func TestWithPlugins(t *testing.T) {
	stock := slices.Clone(dnsserver.Directives)
	got, err := withPlugins(stock)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stock, dnsserver.Directives) {
		t.Fatal("the stock list was modified")
	}
	if len(got) != len(stock)+2 {
		t.Fatalf("len = %d, want %d (no directive may be lost)", len(got), len(stock)+2)
	}
	i := slices.Index(got, "yurthosts")
	if i < 0 || got[i+1] != "hosts" {
		t.Fatalf("yurthosts not immediately before hosts: %v", got)
	}
	j := slices.Index(got, "takeover")
	if j < 1 || got[j-1] != "bind" {
		t.Fatalf("takeover not immediately after bind: %v", got)
	}
	if !slices.Equal(slices.DeleteFunc(slices.Clone(got), func(d string) bool { return d == "yurthosts" || d == "takeover" }), stock) {
		t.Errorf("stock order changed")
	}
	for _, list := range [][]string{{"bind", "forward"}, {"hosts", "forward"}, {"hosts", "bind"}} {
		if _, err := withPlugins(list); err == nil {
			t.Errorf("%v: want an error", list)
		}
	}
}
