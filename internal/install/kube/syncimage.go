package kube

import (
	"fmt"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// SyncImage is --sync-image, else the image deploy/ names.
func SyncImage(env *engine.Env) (string, error) {
	if env.Options.SyncImage != "" {
		return env.Options.SyncImage, nil
	}
	objs, err := deploy.Render(deploy.TunnelNodesSync)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(containers) > 0 {
			if image, ok := containers[0].(map[string]any)["image"].(string); ok {
				return image, nil
			}
		}
	}
	return "", fmt.Errorf("deploy/%s has no Deployment image", deploy.TunnelNodesSync)
}
