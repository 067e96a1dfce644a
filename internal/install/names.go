package install

import (
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of the kubeadm objects more than one step works with.
const (
	corefileKey    = "Corefile"
	kubeDNSService = "kube-dns"
)

// corednsYurtConfigMap holds the DaemonSet's Corefile: the stock one is never edited.
const corednsYurtConfigMap = "coredns-yurt"

// key is the key of a kube-system object.
func key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: tunnelnodes.Namespace, Name: name}
}
