package harness

import (
	"strconv"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RavenProxyService builds kube-system/x-raven-proxy-internal-svc as
// yurt-manager's gatewayinternalservice controller keeps it: label app:
// raven, no selector (the controller writes its endpoints), one port per
// Gateway proxy port named http-<port> (to 10264) or https-<port> (to
// 10263), sorted by name. clusterIP may be empty (allocated).
func RavenProxyService(clusterIP string) *corev1.Service {
	port := func(scheme string, p, target int32) corev1.ServicePort {
		return corev1.ServicePort{Name: scheme + "-" + strconv.Itoa(int(p)), Protocol: corev1.ProtocolTCP, Port: p, TargetPort: intstr.FromInt32(target)}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.RavenServiceName, Labels: map[string]string{"app": "raven"}},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{port("http", 10255, 10264), port("https", 10250, 10263), port("https", 9100, 10263)},
		},
	}
	if clusterIP != "" {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = clusterIP, []string{clusterIP}
	}
	return svc
}

// RavenConfig builds kube-system/raven-cfg, Raven's global config, with its
// L7 proxy on or off as enableProxy says (written as given: yurt-manager
// compares it in any case) and its L3 tunnel on.
func RavenConfig(enableProxy string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.RavenGlobalConfigName},
		Data:       map[string]string{tunnelnodes.RavenEnableProxyKey: enableProxy, "enable-l3-tunnel": "true"},
	}
}
