// Package yurthosts is a CoreDNS plugin that answers OpenYurt node names from
// the yurt-tunnel-nodes ConfigMap and the tunnel Service, watched directly
// through the Kubernetes API instead of a mounted hosts file.
package yurthosts

import (
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"
)

const pluginName = "yurthosts"

// YurtHosts is the plugin handler.
type YurtHosts struct {
	Next  plugin.Handler
	Zones []string
	Fall  fall.F

	ttl       uint32
	noReverse bool

	// records is replaced as a whole on every change; lookups never lock.
	records atomic.Pointer[records]

	source         source
	startupTimeout time.Duration
	watcher        *watcher
}

// source names the API objects the records come from and how to reach them.
type source struct {
	configMapNamespace, configMapName, configMapKey string
	// shardsNamespace holds the records' shards; empty: only the single
	// ConfigMap is read.
	shardsNamespace string
	// serviceName is empty when the Corefile says "service none".
	serviceNamespace, serviceName string
	kubeconfig, kubeContext       string
	// yurthubProxy is yurthub's HTTP proxy, read through without
	// credentials when yurthubHealthz answers as the server starts; empty:
	// yurthub is not looked for.
	yurthubProxy, yurthubHealthz string
}

func (s source) configMapRef() string { return s.configMapNamespace + "/" + s.configMapName }

func newYurtHosts() *YurtHosts {
	y := &YurtHosts{ttl: 5, startupTimeout: 5 * time.Second}
	y.records.Store(emptyRecords)
	return y
}

// Name implements plugin.Handler.
func (y *YurtHosts) Name() string { return pluginName }
