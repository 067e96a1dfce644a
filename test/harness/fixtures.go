package harness

import (
	"context"
	"fmt"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Node describes a cluster node the way kubeadm and OpenYurt shape it.
type Node struct {
	Name       string
	InternalIP string
	ExternalIP string
	Edge       bool
	// Ready gives the node the condition Ready True, as a running kubelet
	// reports it; without it the node is NotReady (no kubelet ever posted).
	Ready bool
	// Labels are added to the node's own.
	Labels map[string]string
}

// Object builds the Node object.
func (n Node) Object() *corev1.Node {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{}}}
	if len(validation.IsValidLabelValue(n.Name)) == 0 {
		node.Labels[corev1.LabelHostname] = n.Name
	}
	if n.Edge {
		node.Labels[tunnelnodes.EdgeNodeLabel] = "true"
	}
	for k, v := range n.Labels {
		node.Labels[k] = v
	}
	if n.Ready {
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	}
	if n.InternalIP != "" {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: n.InternalIP})
	}
	if n.ExternalIP != "" {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: n.ExternalIP})
	}
	node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
	return node
}

// CreateNode creates the node with its addresses (status is written through
// the status subresource, as the kubelet does).
func (cp *ControlPlane) CreateNode(t TB, n Node) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	want := n.Object()
	created, err := cp.Client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node %s: %v", n.Name, err)
	}
	created.Status.Addresses, created.Status.Conditions = want.Status.Addresses, want.Status.Conditions
	updated, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("setting addresses of node %s: %v", n.Name, err)
	}
	return updated
}

// TunnelService builds the tunnel server's internal Service as
// yurt-tunnel-server deploys it. clusterIPs may be empty (allocated by the
// apiserver), one IP, or an IPv4 and an IPv6 address for dual-stack.
func TunnelService(clusterIPs ...string) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName,
			Labels: map[string]string{"name": "yurt-tunnel-server"}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"k8s-app": "yurt-tunnel-server"},
			Ports: []corev1.ServicePort{
				{Name: "https", Port: 10250, TargetPort: intstr.FromInt32(10263), Protocol: corev1.ProtocolTCP},
				{Name: "http", Port: 10255, TargetPort: intstr.FromInt32(10264), Protocol: corev1.ProtocolTCP},
			},
		},
	}
	if len(clusterIPs) > 0 {
		svc.Spec.ClusterIP = clusterIPs[0]
		svc.Spec.ClusterIPs = clusterIPs
	}
	if len(clusterIPs) > 1 {
		policy := corev1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &policy
	}
	return svc
}

// CreateService creates svc and returns it as stored (with its ClusterIPs).
func (cp *ControlPlane) CreateService(t TB, svc *corev1.Service) *corev1.Service {
	t.Helper()
	created, err := cp.Client.CoreV1().Services(svc.Namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating service %s/%s: %v", svc.Namespace, svc.Name, err)
	}
	return created
}

// DeleteService deletes a Service; its ClusterIP is released with it.
func (cp *ControlPlane) DeleteService(t TB, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	if err := cp.Client.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting service %s/%s: %v", namespace, name, err)
	}
}

// ServerConfig builds the tunnel server's config ConfigMap.
func ServerConfig(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServerConfigName},
		Data:       data,
	}
}

// ApplyConfigMap creates the ConfigMap or replaces its data, labels and annotations.
func (cp *ControlPlane) ApplyConfigMap(t TB, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	cms := cp.Client.CoreV1().ConfigMaps(cm.Namespace)
	current, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil {
		created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating configmap %s/%s: %v", cm.Namespace, cm.Name, err)
		}
		return created
	}
	current.Data, current.BinaryData = cm.Data, cm.BinaryData
	current.Labels, current.Annotations = cm.Labels, cm.Annotations
	updated, err := cms.Update(ctx, current, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating configmap %s/%s: %v", cm.Namespace, cm.Name, err)
	}
	return updated
}

// SyntheticRecords returns n records mixed as a real cluster has them:
// edge-node-NNNNN at the tunnel IP and every tenth a cloud-node-NNNNN at
// its own address; as ConfigMap lines ("IP\tname") and as name → address.
func SyntheticRecords(n int, tunnelIP string) (lines []string, addrs map[string]string) {
	addrs = make(map[string]string, n)
	for i := range n {
		name, ip := fmt.Sprintf("edge-node-%05d", i), tunnelIP
		if i%10 == 0 {
			name, ip = fmt.Sprintf("cloud-node-%05d", i), fmt.Sprintf("192.168.%d.%d", i/250, i%250+1)
		}
		lines = append(lines, ip+"\t"+name)
		addrs[name] = ip
	}
	return lines, addrs
}
