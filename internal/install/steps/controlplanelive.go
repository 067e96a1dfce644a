package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/staticpod"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// undoneByKubeadm heads a control-plane status whose edits are gone: kubeadm
// renders the static pods again on every upgrade.
const undoneByKubeadm = "undone since install (kubeadm upgrade renders the static pods again: run install, " +
	"and give kubeadm upgrade --patches with install's kubeadm patches directory)"

// liveControlPlane reads, from the mirror pods of each control-plane node,
// what its kubelet runs, and names each of install's edits it lacks: the
// edits are live only in the running components, whatever the manifests'
// files or install's record say.
func liveControlPlane(ctx context.Context, env *engine.Env, keepNodeLifecycle bool) (missing []string, err error) {
	nodes, err := kube.ControlPlaneNodes(ctx, env)
	if err != nil {
		return nil, err
	}
	for _, node := range nodes {
		apiserver, err := mirrorPod(ctx, env, "kube-apiserver", node)
		if err != nil {
			return nil, err
		}
		if apiserver == nil {
			missing = append(missing, "no mirror pod kube-apiserver-"+node)
		} else {
			if v, _ := commandFlag(apiserver, "kubelet-preferred-address-types"); v != staticpod.PreferredAddressTypes {
				missing = append(missing, fmt.Sprintf("%s runs --kubelet-preferred-address-types=%s", apiserver.Name, v))
			}
			if apiserver.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
				missing = append(missing, fmt.Sprintf("%s runs dnsPolicy %s", apiserver.Name, apiserver.Spec.DNSPolicy))
			}
		}
		if keepNodeLifecycle {
			continue
		}
		kcm, err := mirrorPod(ctx, env, "kube-controller-manager", node)
		if err != nil {
			return nil, err
		}
		if kcm == nil {
			missing = append(missing, "no mirror pod kube-controller-manager-"+node)
		} else if v, _ := commandFlag(kcm, "controllers"); !slices.Contains(strings.Split(v, ","), staticpod.DisableNodeLifecycle) {
			missing = append(missing, fmt.Sprintf("%s runs --controllers=%s", kcm.Name, v))
		}
	}
	return missing, nil
}

func mirrorPod(ctx context.Context, env *engine.Env, component, node string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	err := env.Client.Get(ctx, kube.Key(component+"-"+node), p)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the mirror pod %s-%s: %w", component, node, err)
	}
	return p, nil
}

// commandFlag is --name=value of a static pod's one container (command, then args).
func commandFlag(p *corev1.Pod, name string) (string, bool) {
	if len(p.Spec.Containers) == 0 {
		return "", false
	}
	c := p.Spec.Containers[0]
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}
