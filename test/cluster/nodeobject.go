package cluster

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// CreateNodeObject registers a Node with no kubelet behind it, with an
// InternalIP, the way a joining edge node first appears to the sync. An edge
// node gets the edge NodePool's label as yurtadm join gives it: without it
// yurt-manager's yurt-node-conversion controller would convert the node back
// to a cloud node. Its
// addresses are set by a merge patch of the status, not an update: kcm's
// node controllers write the new Node at once, and an update of the
// created object would conflict with them.
func CreateNodeObject(ctx context.Context, cs kubernetes.Interface, name, internalIP string, labels map[string]string) error {
	if labels[tunnelnodes.EdgeNodeLabel] == "true" && labels[NodePoolLabel] == "" {
		labels = maps.Clone(labels)
		labels[NodePoolLabel] = EdgePool
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	status, err := json.Marshal(map[string]any{"status": corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: internalIP}, {Type: corev1.NodeHostName, Address: name}}}})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, status, metav1.PatchOptions{}, "status")
	return err
}
