package install

import (
	"github.com/yurtdns/yurtdns/deploy"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rbacStep lets CoreDNS's ServiceAccount read the records ConfigMap and the
// tunnel Service, each by name only: deploy/coredns-yurt/rbac.
func rbacStep() Step {
	return objectsStep("rbac", func(*Env) ([]*unstructured.Unstructured, error) {
		return deploy.Render(deploy.CoreDNSRBAC)
	})
}
