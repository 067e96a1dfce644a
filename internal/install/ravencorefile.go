package install

import "github.com/yurtdns/yurtdns/internal/tunnelnodes"

// ravenYurthostsOptions point yurthosts at Raven's objects.
var ravenYurthostsOptions = []string{
	"configmap " + tunnelnodes.Namespace + "/" + tunnelnodes.RavenConfigMapName,
	"service " + tunnelnodes.Namespace + "/" + tunnelnodes.RavenServiceName,
	shardsOption,
}

// ravenCorefileStep writes ConfigMap raven-proxy-dns-yurt: raven-proxy-dns's
// Corefile with yurthosts in place of its hosts block. The ConfigMap the
// running stock pods read is never edited: stock CoreDNS crash-loops on
// yurthosts.
func ravenCorefileStep() Step {
	return corefileCopyStep("raven-corefile", ravenProxyDNS, ravenProxyDNSYurt,
		"yurthosts { configmap "+tunnelnodes.Namespace+"/"+tunnelnodes.RavenConfigMapName+"; service "+
			tunnelnodes.Namespace+"/"+tunnelnodes.RavenServiceName+"; "+shardsOption+"; fallthrough } in place of hosts "+tunnelHostsFile,
		func(src string) (string, error) {
			out, _, err := EnsureYurthosts(src, ravenYurthostsOptions)
			return out, err
		})
}
