package kube

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// nonRootUser is the user the coredns-yurt image runs as (distroless's
// "nonroot", like the stock CoreDNS image).
const nonRootUser = int64(65532)

// HardenPod fills in the pod-level security settings the template leaves
// unset: user and group 65532, runAsNonRoot (unless a user is set to root
// explicitly), the RuntimeDefault seccomp profile.
func HardenPod(spec *corev1.PodSpec) {
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	sc := spec.SecurityContext
	runsAsRoot := sc.RunAsUser != nil && *sc.RunAsUser == 0
	for _, c := range spec.Containers {
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil && *c.SecurityContext.RunAsUser == 0 {
			runsAsRoot = true
		}
	}
	if sc.RunAsUser == nil {
		sc.RunAsUser = new(nonRootUser)
	}
	if sc.RunAsGroup == nil {
		sc.RunAsGroup = new(nonRootUser)
	}
	if sc.RunAsNonRoot == nil && !runsAsRoot {
		sc.RunAsNonRoot = new(true)
	}
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	}
}

// HardenContainer fills in the container security settings the template
// leaves unset: no privilege escalation, read-only root filesystem, every
// capability dropped (added ones are kept).
func HardenContainer(c *corev1.Container) {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	sc := c.SecurityContext
	if sc.AllowPrivilegeEscalation == nil {
		sc.AllowPrivilegeEscalation = new(false)
	}
	if sc.ReadOnlyRootFilesystem == nil {
		sc.ReadOnlyRootFilesystem = new(true)
	}
	if sc.Capabilities == nil {
		sc.Capabilities = &corev1.Capabilities{}
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") {
		sc.Capabilities.Drop = append(sc.Capabilities.Drop, "ALL")
	}
}
