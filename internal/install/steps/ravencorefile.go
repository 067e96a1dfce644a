package steps

import (
	"github.com/yurtdns/yurtdns/internal/corefile"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
)

// ravenCorefileStep writes ConfigMap raven-proxy-dns-yurt: raven-proxy-dns's
// Corefile with yurthosts in place of its hosts block. The ConfigMap the
// running stock pods read is never edited: stock CoreDNS crash-loops on
// yurthosts.
func ravenCorefileStep(l layout.Layout) engine.Step {
	return corefileCopyStep("raven-corefile", tunnelnodes.RavenProxyDNSName, ravenProxyDNSYurt, l.YurthostsOptions, "in place of hosts "+corefile.TunnelHostsFile)
}
