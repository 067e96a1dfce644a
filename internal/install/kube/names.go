package kube

import (
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of the kubeadm objects more than one step works with.
const (
	CorefileKey    = "Corefile"
	KubeDNSService = tunnelnodes.KubeDNSService
)

// CorednsYurtConfigMap holds the DaemonSet's Corefile: the stock one is never edited.
const CorednsYurtConfigMap = "coredns-yurt"

// Key is the key of a kube-system object.
func Key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: tunnelnodes.Namespace, Name: name}
}
