// Package layout is the one registry of the tunnel layouts yurtdns knows
// (--profile): per layout, the objects the sync reads and writes, the
// record rules, what yurthosts is told to read, the checks install runs
// before touching a cluster and what --verify-dns may read. install, the
// sync and the commands all look a layout up here; none of them compares
// a layout's name. Install's steps per layout are in
// internal/install/steps/plan.go.
package layout

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Layout is everything that differs between tunnel layouts.
type Layout struct {
	Name string
	// Help is --profile's description of the layout.
	Help string

	// The kube-system objects of the layout: the records ConfigMap the sync
	// writes, the tunnel Service whose ClusterIP the records point at, the
	// tunnel server's config that lists extra ports ("": the sync keeps no
	// ports), and the ConfigMap the rules read ("": none).
	RecordsConfigMap, Service, ServerConfig, Config string

	// Rules are the record rules for the cluster as it is now: config is
	// the data of Config (nil when it is missing or there is none), tunnelIP
	// the Service's ClusterIP (invalid when it has none). toTunnel is false
	// when no name maps to the tunnel: the records then carry no ClusterIPs.
	Rules func(config map[string]string, tunnelIP netip.Addr) (rules tunnelnodes.Rules, toTunnel bool)
	// NeedsTunnel: without the tunnel's ClusterIP the sync writes nothing
	// and yurthosts keeps answering the stored records (the rules would
	// drop every edge node).
	NeedsTunnel bool
	// ProxiesCloudNodes: the rules map cloud nodes to the tunnel too
	// (--verify-dns calls them "proxy", not "edge").
	ProxiesCloudNodes bool

	// YurthostsOptions are the lines of a yurthosts block (before its
	// fallthrough) that read this layout's records.
	YurthostsOptions []string
	// DNSServiceAccount is the ServiceAccount install lets read the records
	// (the node-local caches run as it).
	DNSServiceAccount string

	// Preflight refuses a cluster the layout does not fit; exists reports
	// whether an object of kube-system exists. It may print a hint to out.
	Preflight func(exists func(obj client.Object, name string) (bool, error), out io.Writer) error
}

// ShardsOption points yurthosts at the records' shards (see tunnelnodes).
var ShardsOption = "shards " + tunnelnodes.ShardsNamespace

var (
	mu      sync.RWMutex
	layouts []Layout
)

// Register adds a layout; the first registered is the default. A name
// registered twice is a programming error.
func Register(l Layout) {
	mu.Lock()
	defer mu.Unlock()
	if slices.ContainsFunc(layouts, func(o Layout) bool { return o.Name == l.Name }) {
		panic("layout " + l.Name + " registered twice")
	}
	layouts = append(layouts, l)
}

// Named looks --profile's value up ("" is the default).
func Named(name string) (Layout, error) {
	mu.RLock()
	defer mu.RUnlock()
	if name == "" {
		return layouts[0], nil
	}
	if i := slices.IndexFunc(layouts, func(l Layout) bool { return l.Name == name }); i >= 0 {
		return layouts[i], nil
	}
	return Layout{}, fmt.Errorf("--profile %q: must be one of %s", name, strings.Join(namesLocked(), ", "))
}

// All are the registered layouts, the default first.
func All() []Layout {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Clone(layouts)
}

// Names are --profile's values, the default first.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked()
}

func namesLocked() []string {
	var names []string
	for _, l := range layouts {
		names = append(names, l.Name)
	}
	return names
}

// Reads are what the layout's rules get: the tunnel Service and, if the
// layout has one, its config ConfigMap (for --verify-dns's Jobs).
func (l Layout) Reads() []rbacv1.PolicyRule {
	read := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{l.Service}, Verbs: []string{"get"}}}
	if l.Config != "" {
		read = append(read, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{l.Config}, Verbs: []string{"get"}})
	}
	return read
}
