package steps

import (
	"fmt"
	"slices"

	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// daemonSetFromDeployment keeps the Deployment's pod template (args, probes,
// resources, security context, priority class, service account), swaps the
// image, reads the Corefile from ConfigMap coredns-yurt, drops the mounted
// tunnel-nodes hosts file, and tolerates every taint.
// Security settings the template leaves unset are filled in least-privilege:
// non-root user 65532, the RuntimeDefault seccomp profile, no privilege
// escalation, a read-only root filesystem, every capability dropped (kubeadm's
// own NET_BIND_SERVICE is kept); settings the template makes are kept.
func daemonSetFromDeployment(d *appsv1.Deployment, image string) (*appsv1.DaemonSet, error) {
	tmpl := d.Spec.Template.DeepCopy()
	var found bool
	var hostsVolumes []string
	tmpl.Spec.Volumes = slices.DeleteFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool {
		drop := v.ConfigMap != nil && v.ConfigMap.Name == tunnelnodes.ConfigMapName
		if drop {
			hostsVolumes = append(hostsVolumes, v.Name)
		}
		return drop
	})
	// The Corefile comes from the DaemonSet's own ConfigMap.
	corefileVolume := slices.IndexFunc(tmpl.Spec.Volumes, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == tunnelnodes.CoreDNSName
	})
	if corefileVolume < 0 {
		return nil, fmt.Errorf("Deployment coredns has no volume from ConfigMap coredns: unknown layout")
	}
	tmpl.Spec.Volumes[corefileVolume].ConfigMap.Name = kube.CorednsYurtConfigMap
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		if c.Name != tunnelnodes.CoreDNSName {
			continue
		}
		found = true
		if image != "" {
			c.Image = image
		}
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			for _, v := range hostsVolumes {
				if m.Name == v {
					return true
				}
			}
			return false
		})
		kube.HardenContainer(c)
	}
	if !found {
		return nil, fmt.Errorf("Deployment coredns has no container named coredns: unknown layout")
	}
	kube.HardenPod(&tmpl.Spec)
	tmpl.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	// A new pod is Ready beside the old one, for surgeReadySeconds, before
	// the old one goes: a
	// node whose pods reach kube-dns only through their own node's pods
	// (the topology annotation on an edge node pool) always has one.
	maxSurge, maxUnavailable := intstr.FromString("10%"), intstr.FromInt32(0)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.CoreDNSName, Namespace: tunnelnodes.Namespace, Labels: d.Labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:        d.Spec.Selector,
			Template:        *tmpl,
			MinReadySeconds: surgeReadySeconds,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable},
			},
		},
	}, nil
}

// surgeReadySeconds is how long a DaemonSet's surge pod is Ready before the
// old pod on its node is deleted: time for every kube-proxy (an edge node's
// through yurthub) to program the new endpoint, so that the old pod's
// lameduck is not the only path left.
const surgeReadySeconds = 5
