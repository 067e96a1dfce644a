package kube

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobLabel marks install's Jobs and their pods with what they do.
const JobLabel = "yurtdns.io/job"

// NodeJob is one of install's Jobs: one container, run once (no retry
// inside the Job: a failure is reported at once, and every action is
// idempotent, so running install or revert again is the retry), tolerating
// every taint, the end of its output its failure's message. Its pod's
// node, identity and security settings are the caller's.
func NodeJob(name, action, container, image string, args []string) *batchv1.Job {
	backoff := int32(0)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tunnelnodes.Namespace,
			Labels: map[string]string{JobLabel: action, engine.ManagedByLabel: "yurtdns"}},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{JobLabel: action}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name:  container,
						Image: image,
						Args:  args,
						// So install can say what failed.
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
				},
			},
		},
	}
}

// HostJob is a NodeJob that changes one node's own files or network: one
// container of the sync image, pinned to the node, as root (the files are
// root's), every capability dropped but Add, read-only root filesystem,
// with the host directory HostDir mounted at Mount when HostDir is set.
type HostJob struct {
	Name, Node, Action, Container, Image string
	Args                                 []string
	Add                                  []corev1.Capability
	HostNetwork, HostPID                 bool
	HostDir, Mount                       string
}

// Job is the Job h describes.
func (h HostJob) Job() *batchv1.Job {
	job := NodeJob(h.Name, h.Action, h.Container, h.Image, h.Args)
	spec := &job.Spec.Template.Spec
	spec.NodeName = h.Node
	spec.PriorityClassName = "system-node-critical"
	spec.HostNetwork, spec.HostPID = h.HostNetwork, h.HostPID
	spec.DNSPolicy = corev1.DNSClusterFirst
	if h.HostNetwork {
		spec.DNSPolicy = corev1.DNSDefault
	}
	root := int64(0)
	c := &spec.Containers[0]
	c.SecurityContext = &corev1.SecurityContext{
		RunAsUser:                &root,
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: h.Add},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if h.HostDir != "" {
		dir := corev1.HostPathDirectory
		c.VolumeMounts = []corev1.VolumeMount{{Name: "host", MountPath: h.Mount}}
		spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: h.HostDir, Type: &dir}}}}
	}
	return job
}

// NodeHash is the part of a per-node Job's name that names its node: the
// same on every run (a later run finds an earlier one's Job), short and
// valid whatever the node's name.
func NodeHash(node string) string {
	sum := sha256.Sum256([]byte(node))
	return hex.EncodeToString(sum[:])[:10]
}
