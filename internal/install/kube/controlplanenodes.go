package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNoControlPlaneNode is ControlPlaneNodes finding none.
var ErrNoControlPlaneNode = errors.New("no control-plane node found (no kube-apiserver mirror pod, no node labelled node-role.kubernetes.io/control-plane)")

// ControlPlaneNodes finds the nodes running kube-apiserver or
// kube-controller-manager (their mirror pods), else the nodes labelled
// node-role.kubernetes.io/control-plane.
func ControlPlaneNodes(ctx context.Context, env *engine.Env) ([]string, error) {
	var nodes []string
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace), client.MatchingLabels{"tier": "control-plane"}); err != nil {
		return nil, fmt.Errorf("listing control-plane pods: %w", err)
	}
	for _, p := range pods.Items {
		c := p.Labels["component"]
		if (c == "kube-apiserver" || c == "kube-controller-manager") && p.Spec.NodeName != "" && !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	if len(nodes) == 0 {
		list := &corev1.NodeList{}
		if err := env.Client.List(ctx, list, client.HasLabels{"node-role.kubernetes.io/control-plane"}); err != nil {
			return nil, fmt.Errorf("listing control-plane nodes: %w", err)
		}
		for _, n := range list.Items {
			nodes = append(nodes, n.Name)
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: use --manifests-dir on the node instead", ErrNoControlPlaneNode)
	}
	slices.Sort(nodes)
	return nodes, nil
}
