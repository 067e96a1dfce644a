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

// KubeadmUpgradeWithPatches is how a kubeadm upgrade keeps install's edits
// rather than rendering the static pods without them.
const KubeadmUpgradeWithPatches = "give kubeadm upgrade --patches with install's kubeadm patches directory"

// undoneByKubeadm heads a control-plane status whose edits are gone: kubeadm
// renders the static pods again on every upgrade.
const undoneByKubeadm = "undone since install (kubeadm upgrade renders the static pods again: run install, and " +
	KubeadmUpgradeWithPatches + ")"

// liveControlPlane reads, from the mirror pods of each control-plane node,
// what its kubelet runs, and names each of install's edits it lacks: the
// edits are live only in the running components, whatever the manifests'
// files or install's record say.
func liveControlPlane(ctx context.Context, env *engine.Env, keepNodeLifecycle bool) (missing []string, err error) {
	apiservers, err := LiveAPIServers(ctx, env)
	if err != nil {
		return nil, err
	}
	for _, a := range apiservers {
		if a.Pod == "" {
			missing = append(missing, "no mirror pod kube-apiserver-"+a.Node)
		}
		for _, r := range a.Runs {
			missing = append(missing, a.Pod+" runs "+r)
		}
		if keepNodeLifecycle {
			continue
		}
		kcm, err := mirrorPod(ctx, env, "kube-controller-manager", a.Node)
		if err != nil {
			return nil, err
		}
		if kcm == nil {
			missing = append(missing, "no mirror pod kube-controller-manager-"+a.Node)
		} else if v, _ := commandFlag(kcm, "controllers"); !slices.Contains(strings.Split(v, ","), staticpod.DisableNodeLifecycle) {
			missing = append(missing, fmt.Sprintf("%s runs --controllers=%s", kcm.Name, v))
		}
	}
	return missing, nil
}

// LiveAPIServer is what one control-plane node's kubelet runs of
// kube-apiserver, against install's edits.
type LiveAPIServer struct {
	Node string
	// Pod is its mirror pod, "" when there is none.
	Pod string
	// Runs names each of install's edits it lacks by what it runs instead
	// ("dnsPolicy ClusterFirst"); none when it has them all.
	Runs []string
}

// LiveAPIServers reads each control-plane node's kube-apiserver mirror pod,
// in ControlPlaneNodes' order, as the control-plane step's status does.
func LiveAPIServers(ctx context.Context, env *engine.Env) ([]LiveAPIServer, error) {
	nodes, err := kube.ControlPlaneNodes(ctx, env)
	if err != nil {
		return nil, err
	}
	var live []LiveAPIServer
	for _, node := range nodes {
		a := LiveAPIServer{Node: node}
		pod, err := mirrorPod(ctx, env, "kube-apiserver", node)
		if err != nil {
			return nil, err
		}
		if pod != nil {
			a.Pod = pod.Name
			if v, _ := commandFlag(pod, "kubelet-preferred-address-types"); v != staticpod.PreferredAddressTypes {
				a.Runs = append(a.Runs, "--kubelet-preferred-address-types="+v)
			}
			if pod.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
				a.Runs = append(a.Runs, "dnsPolicy "+string(pod.Spec.DNSPolicy))
			}
		}
		live = append(live, a)
	}
	return live, nil
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
