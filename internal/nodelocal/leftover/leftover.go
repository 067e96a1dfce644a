// Package leftover is what stays of NodeLocal DNS after revert on a node
// where pods made under it still run: their resolv.conf names the
// node-local address until they are made again. revert hands the address to
// a forwarder there (deploy/node-local-dns-leftover), whose linger container
// tears the node down once the last such pod is gone. Both ask Strands.
package leftover

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Names of the leftover's objects (deploy/node-local-dns-leftover).
const (
	// Name is the DaemonSet, ServiceAccount, ConfigMap, Role and
	// RoleBinding, all in kube-system.
	Name = "node-local-dns-leftover"
	// ClusterRole owns every other object of the leftover: deleting it
	// lets the garbage collector remove them all.
	ClusterRole = "yurtdns:node-local-dns-leftover"
	// CorefileKey is the forwarder's Corefile in the ConfigMap; every other
	// key is a node that still lingers, its value the node's Window.
	CorefileKey = "Corefile"

	// AppLabel is the pods' label; CacheApp the node-local cache's value,
	// App the leftover's.
	AppLabel = "k8s-app"
	CacheApp = "node-local-dns"
	App      = "node-local-dns-leftover"
)

// Window is when a node's kubelet gave new pods the node-local address:
// from the switch until the restore was confirmed (zero while switched).
type Window struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until,omitzero"`
}

// Strands: p's resolv.conf names the node-local address, and nothing else
// makes it anew: it takes the kubelet's clusterDNS, has not finished, and
// its sandbox (where the kubelet wrote its resolv.conf) was made within w.
func (w Window) Strands(p *corev1.Pod) bool {
	if !usesClusterDNS(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	made := sandboxMade(p)
	return !made.Before(w.Since) && (w.Until.IsZero() || made.Before(w.Until))
}

// sandboxMade is when the kubelet last wrote the pod's resolv.conf: when it
// made the pod's sandbox, which a node's reboot or a sandbox's death does
// again for a pod made long before (PodReadyToStartContainers turns True
// then), or else when the pod was created. A mirror pod's conditions start
// afresh whenever its kubelet restarts, as the switch does, so only its
// creation counts (a new static pod is a new mirror pod).
func sandboxMade(p *corev1.Pod) time.Time {
	made := p.CreationTimestamp.Time
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return made
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReadyToStartContainers && c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(made) {
			made = c.LastTransitionTime.Time
		}
	}
	return made
}

// usesClusterDNS: the kubelet writes the pod's resolv.conf from clusterDNS.
func usesClusterDNS(p *corev1.Pod) bool {
	switch p.Spec.DNSPolicy {
	case corev1.DNSClusterFirstWithHostNet:
		return true
	case corev1.DNSClusterFirst, "":
		return !p.Spec.HostNetwork
	}
	return false
}

// Windows reads the lingering nodes from the ConfigMap's data.
func Windows(data map[string]string) (map[string]Window, error) {
	windows := map[string]Window{}
	for node, v := range data {
		if node == CorefileKey {
			continue
		}
		var w Window
		if err := json.Unmarshal([]byte(v), &w); err != nil {
			return nil, fmt.Errorf("ConfigMap %s, node %s: %w", Name, node, err)
		}
		windows[node] = w
	}
	return windows, nil
}

// Encode is w as the ConfigMap holds it.
func (w Window) Encode() string {
	out, _ := json.Marshal(w) // a struct of two times: cannot fail
	return string(out)
}

// Action is what the linger does next on its node.
type Action int

const (
	// Serve: pods on the node still resolve at the address.
	Serve Action = iota
	// Yield: a node-local cache runs there again (install): it owns the
	// address, and install deletes the leftover.
	Yield
	// TearDown: nothing resolves there any more; also for a node the
	// ConfigMap no longer lists, whose leftover pod's setup (after a
	// reboot) put the address back.
	TearDown
)

// Decide is the linger's next action on node, from the lingering nodes and
// the pods on the node; stranded names the pods it serves.
func Decide(windows map[string]Window, node string, pods []corev1.Pod) (a Action, stranded []string) {
	w, lingers := windows[node]
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != node {
			continue
		}
		if lingers && w.Strands(p) {
			stranded = append(stranded, p.Namespace+"/"+p.Name)
		}
	}
	if len(stranded) > 0 {
		return Serve, stranded
	}
	for i := range pods {
		if pods[i].Spec.NodeName == node && pods[i].Labels[AppLabel] == CacheApp {
			return Yield, nil
		}
	}
	return TearDown, nil
}
