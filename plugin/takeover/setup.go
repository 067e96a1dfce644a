package takeover

import (
	"strings"
	"sync"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/plugin/ready"
)

const pluginName = "takeover"

var log = clog.NewWithPlugin(pluginName)

// readyPoll is how often a started block's plugins are asked whether they
// are ready (the ready plugin asks on each probe; the kubelet probes far
// less often, so the program is attached before the pod turns Ready).
const readyPoll = 100 * time.Millisecond

func init() {
	plugin.Register(pluginName, setup)
	// OnStartup callbacks run before the servers listen; this event comes
	// once they do, at start and after every reload.
	caddy.RegisterEventHook(pluginName, func(event caddy.EventName, _ any) error {
		if event == caddy.InstanceStartupEvent {
			steerStarted()
		}
		return nil
	})
}

// block is a server block with takeover; stopped closes when its instance
// shuts down (a reload or the end).
type block struct {
	cfg     *dnsserver.Config
	stopped chan struct{}
}

// started are the server blocks of the instance being started that have
// takeover; taken once their sockets exist (a reload sets its blocks up
// again).
var (
	mu      sync.Mutex
	started []*block
)

func setup(c *caddy.Controller) error {
	c.Next()
	if c.NextArg() || c.NextBlock() {
		return plugin.Error(pluginName, c.ArgErr())
	}
	b := &block{cfg: dnsserver.GetConfig(c), stopped: make(chan struct{})}
	var once sync.Once
	c.OnShutdown(func() error {
		once.Do(func() { close(b.stopped) })
		return nil
	})
	mu.Lock()
	started = append(started, b)
	mu.Unlock()
	return nil
}

// steerStarted gives the sockets of each block just started the program
// once the block is ready.
func steerStarted() {
	mu.Lock()
	blocks := started
	started = nil
	mu.Unlock()
	for _, b := range blocks {
		go b.steerWhenReady()
	}
}

// steerWhenReady waits until every plugin of the block that reports
// readiness is ready (the kubernetes plugin and yurthosts synced, what the
// ready plugin, and so the pod's readiness, waits for), then attaches the
// program. Until then the older server keeps its share of the queries: a
// server that takes them all while it still lists the cluster's objects
// answers them late or not at all. The listen addresses are read now, after
// bind has set them.
func (b *block) steerWhenReady() {
	addrs, err := listenAddrs(b.cfg.ListenHosts, b.cfg.Port)
	if err != nil {
		log.Errorf("%v", err)
		return
	}
	if waiting := b.notReady(); len(waiting) > 0 {
		log.Infof("new queries to %v are shared with any older server until %s are ready", addrs, strings.Join(waiting, ", "))
		tick := time.NewTicker(readyPoll)
		defer tick.Stop()
		for len(b.notReady()) > 0 {
			select {
			case <-b.stopped:
				return
			case <-tick.C:
			}
		}
	}
	steered, err := steerToSecond(addrs)
	if err != nil {
		log.Errorf("%v", err)
		return
	}
	log.Infof("new queries to %s go to the newer of two servers sharing them", strings.Join(steered, ", "))
}

// notReady names the block's plugins that report readiness and are not
// ready.
func (b *block) notReady() []string {
	var names []string
	for _, h := range b.cfg.Handlers() {
		if r, ok := h.(ready.Readiness); ok && !r.Ready() {
			names = append(names, h.Name())
		}
	}
	return names
}
