package install

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// jobLabel marks install's Jobs and their pods with what they do.
const jobLabel = "yurtdns.io/job"

// hostJob is a Job that changes one node's own files or network: one
// container of the sync image, pinned to the node, as root (the files are
// root's), every capability dropped but add, read-only root filesystem,
// with the host directory hostDir mounted at mount when hostDir is set.
type hostJob struct {
	name, node, action, container, image string
	args                                 []string
	add                                  []corev1.Capability
	hostNetwork, hostPID                 bool
	hostDir, mount                       string
}

func (h hostJob) job() *batchv1.Job {
	// No retry inside the Job: a failure is reported at once, and every
	// action is idempotent, so running install (or revert) again is the
	// retry.
	backoff := int32(0)
	root := int64(0)
	var mounts []corev1.VolumeMount
	var volumes []corev1.Volume
	if h.hostDir != "" {
		dir := corev1.HostPathDirectory
		mounts = []corev1.VolumeMount{{Name: "host", MountPath: h.mount}}
		volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: h.hostDir, Type: &dir}}}}
	}
	dnsPolicy := corev1.DNSClusterFirst
	if h.hostNetwork {
		dnsPolicy = corev1.DNSDefault
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: h.name, Namespace: tunnelnodes.Namespace,
			Labels: map[string]string{jobLabel: h.action, ManagedByLabel: "yurtdns"}},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{jobLabel: h.action}},
				Spec: corev1.PodSpec{
					NodeName:          h.node,
					RestartPolicy:     corev1.RestartPolicyNever,
					PriorityClassName: "system-node-critical",
					HostNetwork:       h.hostNetwork,
					HostPID:           h.hostPID,
					DNSPolicy:         dnsPolicy,
					Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:  h.container,
						Image: h.image,
						Args:  h.args,
						// The end of its output becomes the failure's message, so
						// install can say what failed.
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						SecurityContext: &corev1.SecurityContext{
							RunAsUser:                &root,
							AllowPrivilegeEscalation: new(false),
							ReadOnlyRootFilesystem:   new(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: h.add},
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
						VolumeMounts: mounts,
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// nodeHash is the part of a per-node Job's name that names its node: the
// same on every run (a later run finds an earlier one's Job), short and
// valid whatever the node's name.
func nodeHash(node string) string {
	sum := sha256.Sum256([]byte(node))
	return hex.EncodeToString(sum[:])[:10]
}
