package steps

import (
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
)

// corefileStep writes the DaemonSet's own ConfigMap coredns-yurt: the stock
// Corefile with yurthosts. The stock coredns ConfigMap is never edited, so
// the stock Deployment is never handed a Corefile it cannot parse (stock
// CoreDNS crash-loops on yurthosts), whatever moment install or revert stops.
func corefileStep(l layout.Layout) engine.Step {
	return corefileCopyStep("corefile", tunnelnodes.CoreDNSName, kube.CorednsYurtConfigMap, l.YurthostsOptions, "in the .:53 block")
}
