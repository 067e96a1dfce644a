package steps

import (
	"fmt"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
)

// The step's name (the sync step reads --skip for it) and the annotation's
// value: kube-dns answered within the node pool.
const (
	kubeDNSTopologyStepName = "kube-dns-topology"
	topologyValue           = "openyurt.io/nodepool"
)

// kubeDNSTopologyStep annotates kube-dns so that it answers within the node
// pool (OpenYurt's service topology): an edge node cut off from the cloud
// still resolves through the CoreDNS on its side.
func kubeDNSTopologyStep() engine.Step {
	edit := kube.MapEntryEdit(fmt.Sprintf("Service %s/%s annotation %s", tunnelnodes.Namespace, kube.KubeDNSService, tunnelnodes.TopologyKeysAnnotation),
		"Service", kube.KubeDNSService, tunnelnodes.TopologyKeysAnnotation,
		func() *corev1.Service { return &corev1.Service{} }, func(svc *corev1.Service) *map[string]string { return &svc.Annotations },
		func(*engine.Env, string, bool) (string, error) { return topologyValue, nil })
	return fieldStep(kubeDNSTopologyStepName, "kube-dns answers within the node pool ("+tunnelnodes.TopologyKeysAnnotation+": "+topologyValue+")", edit, nil)
}
