package yurthosts

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/whoami"
)

// TestReloadLeaksNothing restarts a CoreDNS instance 100 times through
// caddy, exactly as the reload plugin does, and checks that goroutines and
// apiserver watches stay where they were after the first start.
func TestReloadLeaksNothing(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	stock := dnsserver.Directives
	if err := dnsserver.SetDirectives([]string{"bind", "yurthosts", "whoami"}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dnsserver.SetDirectives(stock) }()
	port := harness.FreePort(t)
	corefile := func(ttl int) caddy.Input {
		return caddy.CaddyfileInput{ServerTypeName: "dns", Contents: []byte(fmt.Sprintf(
			".:%d {\n bind 127.0.0.1\n yurthosts {\n  kubeconfig %s\n  ttl %d\n }\n whoami\n}\n",
			port, cp.Kubeconfig, ttl))}
	}
	settle := func() (goroutines, watches int) {
		// Closed watches and connections wind down asynchronously.
		time.Sleep(500 * time.Millisecond)
		return runtime.NumGoroutine(), cp.OpenWatches(t)
	}
	// The apiserver's own loopback informers hold watches too.
	_, apiserverWatches := settle()
	inst, err := caddy.Start(corefile(1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		inst.ShutdownCallbacks()
		inst.Stop()
	}()
	baseGoroutines, baseWatches := settle()
	if baseWatches != apiserverWatches+2 {
		t.Fatalf("one instance should hold 2 watches (ConfigMap, Service): apiserver reports %d, %d before the start", baseWatches, apiserverWatches)
	}
	for i := range 100 {
		if inst, err = inst.Restart(corefile(i%60 + 1)); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	goroutines, watches := settle()
	t.Logf("after 100 reloads: goroutines %d (first start %d), watches %d (first start %d)", goroutines, baseGoroutines, watches, baseWatches)
	if watches != baseWatches {
		t.Errorf("watches grew from %d to %d", baseWatches, watches)
	}
	if goroutines > baseGoroutines+10 {
		t.Errorf("goroutines grew from %d to %d", baseGoroutines, goroutines)
	}
}
