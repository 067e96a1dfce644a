package takeover

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/chaos"
	"github.com/miekg/dns"
)

func TestSetup(t *testing.T) {
	for _, tc := range []struct {
		input   string
		wantErr bool
	}{
		{input: "takeover"},
		{input: "takeover 169.254.20.10", wantErr: true},
		{input: "takeover {\n now\n}", wantErr: true},
	} {
		mu.Lock()
		started = nil
		mu.Unlock()
		err := setup(caddy.NewTestController("dns", tc.input))
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.input, err, tc.wantErr)
		}
		if mu.Lock(); len(started) != map[bool]int{false: 1, true: 0}[tc.wantErr] {
			t.Errorf("%q: %d server blocks registered", tc.input, len(started))
		}
		mu.Unlock()
	}
}

// Two CoreDNS servers on one address, as a cache and its surge pod are: once
// the newer one with takeover is ready, every query over UDP and TCP is
// answered by it, and none is lost while the older one stops.
func TestTakeover(t *testing.T) {
	addr, start := servers(t)
	older := start("older", "")
	defer older.Stop()
	newer := start("newer", "takeover")
	defer newer.Stop()

	harness.Eventually(t, 5*time.Second, func() error {
		for _, network := range []string{"udp", "tcp"} {
			if answers := answeredBy(t, network, addr); answers["newer"] != sends {
				return fmt.Errorf("over %s, answered by: %v; want all %d by the newer server", network, answers, sends)
			}
		}
		return nil
	})

	var wg sync.WaitGroup
	stop := make(chan struct{})
	lost := make([][]error, 2)
	for i, network := range []string{"udp", "tcp"} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := exchange(network, addr); err != nil {
					lost[i] = append(lost[i], err)
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	older.ShutdownCallbacks()
	older.Stop()
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if len(lost[0])+len(lost[1]) > 0 {
		t.Errorf("queries lost while the older server stopped: udp %v, tcp %v", lost[0], lost[1])
	}
}

// Until the newer server's plugins are ready, the older one keeps its
// share: the newer does not take every query while it could not answer.
func TestTakeoverWaitsForReady(t *testing.T) {
	addr, start := servers(t)
	older := start("older", "")
	defer older.Stop()
	gate.ready.Store(false)
	newer := start("newer", "takeover\n gate")
	defer newer.Stop()

	time.Sleep(5 * readyPoll)
	if answers := answeredBy(t, "udp", addr); answers["older"] == 0 || answers["newer"] == 0 {
		t.Errorf("before the newer server is ready, answered by: %v; want both", answers)
	}
	gate.ready.Store(true)
	harness.Eventually(t, 5*time.Second, func() error {
		if answers := answeredBy(t, "udp", addr); answers["newer"] != sends {
			return fmt.Errorf("once the newer server is ready, answered by: %v; want all %d by it", answers, sends)
		}
		return nil
	})
}

// gate is a plugin that reports readiness as told.
var gate gatePlugin

type gatePlugin struct {
	plugin.Handler
	ready atomic.Bool
}

func (g *gatePlugin) Ready() bool  { return g.ready.Load() }
func (g *gatePlugin) Name() string { return "gate" }

func init() {
	plugin.Register("gate", func(c *caddy.Controller) error {
		dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
			gate.Handler = next
			return &gate
		})
		return nil
	})
}

// servers sets the directives of the test Corefiles and returns a free
// loopback address and a func that starts a server there: with plugins,
// answering version.bind with version.
func servers(t *testing.T) (string, func(version, plugins string) *caddy.Instance) {
	stock := dnsserver.Directives
	if err := dnsserver.SetDirectives([]string{"bind", "takeover", "gate", "chaos"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dnsserver.SetDirectives(stock) })
	port := harness.FreePort(t)
	return fmt.Sprintf("127.0.0.1:%d", port), func(version, plugins string) *caddy.Instance {
		inst, err := caddy.Start(caddy.CaddyfileInput{ServerTypeName: "dns", Contents: []byte(fmt.Sprintf(
			".:%d {\n bind 127.0.0.1\n %s\n chaos %s\n}\n", port, plugins, version))})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
}

// answeredBy asks sends times, each from a new socket, and counts the
// answers by version.
func answeredBy(t *testing.T, network, addr string) map[string]int {
	t.Helper()
	answers := map[string]int{}
	for range sends {
		answers[version(t, network, addr)]++
	}
	return answers
}

func version(t *testing.T, network, addr string) string {
	t.Helper()
	r, err := exchange(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 1 {
		t.Fatalf("version.bind: %v", r)
	}
	return r.Answer[0].(*dns.TXT).Txt[0]
}

// exchange asks version.bind. from a new socket, as a pod's resolver does.
func exchange(network, addr string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion("version.bind.", dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassCHAOS
	c := dns.Client{Net: network, Timeout: time.Second}
	r, _, err := c.Exchange(m, addr)
	return r, err
}
