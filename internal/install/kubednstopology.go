package install

import (
	"fmt"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
)

// Names kube-dns-topology works with.
const (
	topologyKey   = "openyurt.io/topologyKeys"
	topologyValue = "openyurt.io/nodepool"
)

// kubeDNSTopologyStep annotates kube-dns so that it answers within the node
// pool (OpenYurt's service topology): an edge node cut off from the cloud
// still resolves through the CoreDNS on its side.
func kubeDNSTopologyStep() Step {
	edit := mapEntryEdit(fmt.Sprintf("Service %s/%s annotation %s", tunnelnodes.Namespace, kubeDNSService, topologyKey),
		"Service", kubeDNSService, topologyKey,
		func() *corev1.Service { return &corev1.Service{} }, func(svc *corev1.Service) *map[string]string { return &svc.Annotations },
		func(*Env, string, bool) (string, error) { return topologyValue, nil })
	return fieldStep("kube-dns-topology", "kube-dns answers within the node pool ("+topologyKey+": "+topologyValue+")", edit, nil)
}
