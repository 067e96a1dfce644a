package steps

import (
	"context"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rbacStep creates the RBAC of the kustomization dir of deploy/ that lets
// the layout's DNS ServiceAccount read the records ConfigMap and the tunnel
// Service, each by name only: deploy/coredns-yurt/rbac for CoreDNS,
// deploy/raven/proxy-dns-rbac for raven-proxy-dns once it runs coredns-yurt.
func rbacStep(name, dir string) engine.Step {
	return objectsStep(name, func(context.Context, *engine.Env) ([]*unstructured.Unstructured, error) {
		return deploy.Render(dir)
	})
}
