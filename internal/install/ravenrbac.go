package install

import (
	"github.com/yurtdns/yurtdns/deploy"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ravenRBACStep lets raven-proxy-dns's ServiceAccount read the records
// ConfigMap and the proxy Service, each by name only, as yurthosts does
// once raven-proxy-dns runs coredns-yurt: deploy/raven/proxy-dns-rbac.
func ravenRBACStep() Step {
	return objectsStep("raven-rbac", func(*Env) ([]*unstructured.Unstructured, error) {
		return deploy.Render(deploy.RavenProxyDNSRBAC)
	})
}
