// Package tunnelsync is the tunnel-nodes-sync controller: it keeps the records
// ConfigMap (node name → tunnel ClusterIP or node IP) and the tunnel
// Service's dnat-* ports equal to what the cluster says they should be.
package tunnelsync

import (
	"fmt"
	"time"

	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"k8s.io/apimachinery/pkg/labels"
)

// Config names the objects the controller reads and writes.
type Config struct {
	Namespace    string
	ConfigMap    string
	ConfigMapKey string
	Service      string
	// ServerConfig is the tunnel server's config ConfigMap; empty disables port sync.
	ServerConfig string
	// Layout decides the record rules (internal/layout).
	Layout layout.Layout
	// RulesConfig is the ConfigMap the layout's rules read (Raven's
	// raven-cfg); empty when they read none.
	RulesConfig      string
	EdgeNodeSelector labels.Selector
	HTTPSTargetPort  int32
	HTTPTargetPort   int32
	// ShardsNamespace holds the records' shards (tunnelnodes.ShardsNamespace);
	// empty writes only the single ConfigMap.
	ShardsNamespace string
	// SkipSingleConfigMap stops writing the single records ConfigMap (its
	// readers then need the shards).
	SkipSingleConfigMap bool
	// Debounce is the least time between two syncs' starts: a change after
	// a quiet period is written at once; changes within Debounce of a sync's
	// start wait until it has passed and are written together.
	Debounce time.Duration
	// KubeDNSTopology, when set, is kept as the value of the kube-dns
	// Service's topology annotation (tunnelnodes.TopologyKeysAnnotation) in
	// Namespace: kubeadm upgrade updates kube-dns from its template, which
	// drops it.
	KubeDNSTopology string
}

// DefaultEdgeNodeSelector selects OpenYurt edge nodes.
const DefaultEdgeNodeSelector = tunnelnodes.EdgeNodeLabel + "=true"

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.Namespace == "" || c.ConfigMap == "" || c.ConfigMapKey == "" || c.Service == "":
		return fmt.Errorf("namespace, configmap, configmap key and service must all be set")
	case c.Layout.Rules == nil:
		return fmt.Errorf("a layout must be set")
	case c.RulesConfig != "" && c.Layout.Config == "":
		return fmt.Errorf("the %s layout's rules read no config ConfigMap, not %s", c.Layout.Name, c.RulesConfig)
	case c.EdgeNodeSelector == nil:
		return fmt.Errorf("edge node selector must be set")
	case c.HTTPSTargetPort < 1 || c.HTTPSTargetPort > 65535 || c.HTTPTargetPort < 1 || c.HTTPTargetPort > 65535:
		return fmt.Errorf("target ports must be 1-65535")
	case c.ShardsNamespace == c.Namespace:
		return fmt.Errorf("shards need a namespace of their own, not %s (readers list every ConfigMap in it)", c.Namespace)
	case c.ShardsNamespace == "" && c.SkipSingleConfigMap:
		return fmt.Errorf("with no shards namespace and no single ConfigMap nothing would be written")
	case c.Debounce < 0:
		return fmt.Errorf("debounce must not be negative")
	}
	if c.ShardsNamespace != "" {
		if err := tunnelnodes.ValidShardsOf(c.ConfigMap); err != nil {
			return fmt.Errorf("configmap: %w", err)
		}
	}
	return nil
}
