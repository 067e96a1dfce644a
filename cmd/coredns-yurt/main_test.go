package main

import (
	"slices"
	"testing"

	"github.com/coredns/coredns/core/dnsserver"
)

func TestWithYurthosts(t *testing.T) {
	stock := slices.Clone(dnsserver.Directives)
	got, err := withYurthosts(stock)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stock, dnsserver.Directives) {
		t.Fatal("the stock list was modified")
	}
	if len(got) != len(stock)+1 {
		t.Fatalf("len = %d, want %d (no directive may be lost)", len(got), len(stock)+1)
	}
	i := slices.Index(got, "yurthosts")
	if i < 0 || got[i+1] != "hosts" {
		t.Fatalf("yurthosts not immediately before hosts: %v", got)
	}
	if !slices.Equal(slices.Delete(slices.Clone(got), i, i+1), stock) {
		t.Errorf("stock order changed")
	}
	if _, err := withYurthosts([]string{"forward"}); err == nil {
		t.Error("want an error when hosts is missing")
	}
}
