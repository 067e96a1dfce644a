package tunnelsync

import (
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// desiredServicePorts keeps every port the sync does not own (in its order)
// and replaces the dnat-* ports with mappings, sorted by port. A mapping whose
// port a kept port already uses is returned in conflicts and left out.
func desiredServicePorts(current []corev1.ServicePort, mappings []tunnelnodes.PortMapping) (ports []corev1.ServicePort, conflicts []tunnelnodes.PortMapping) {
	used := map[int32]bool{}
	owned := map[string]corev1.ServicePort{}
	for _, p := range current {
		if strings.HasPrefix(p.Name, tunnelnodes.DNATPortPrefix) {
			owned[p.Name] = p
			continue
		}
		ports = append(ports, p)
		used[p.Port] = true
	}
	for _, m := range mappings {
		if used[m.Port] {
			conflicts = append(conflicts, m)
			continue
		}
		want := corev1.ServicePort{
			Name:       m.Name(),
			Protocol:   corev1.ProtocolTCP,
			Port:       m.Port,
			TargetPort: intstr.FromInt32(m.TargetPort),
		}
		// Keep an unchanged port as stored, with what the apiserver defaulted.
		if have, ok := owned[want.Name]; ok && portsEqual([]corev1.ServicePort{have}, []corev1.ServicePort{want}) {
			want = have
		}
		ports = append(ports, want)
	}
	return ports, conflicts
}

// portsEqual compares what the sync controls of two port lists, ignoring
// fields the apiserver defaults (nodePort, appProtocol).
func portsEqual(a, b []corev1.ServicePort) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ServicePort) bool {
		return x.Name == y.Name && x.Port == y.Port && x.TargetPort == y.TargetPort &&
			protocolOrTCP(x.Protocol) == protocolOrTCP(y.Protocol)
	})
}

func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}
