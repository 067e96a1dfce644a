package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubeproxyconf"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names the kube-proxy step works with.
const (
	kubeProxyName    = "kube-proxy"
	kubeProxyConfKey = "config.conf"
	restartedAtKey   = "kubectl.kubernetes.io/restartedAt"
	// nodePoolLabel marks a node yurtadm join put in a NodePool.
	nodePoolLabel = "apps.openyurt.io/nodepool"
)

// kubeProxyStep makes kube-proxy use the in-cluster config, which yurthub
// serves on OpenYurt nodes (pointing at itself, so kube-proxy keeps working
// while the node is cut off). It only applies where yurthub runs: see
// kubeProxySkipReason.
func kubeProxyStep() engine.Step {
	edit := kube.ConfigMapKeyEdit(kubeProxyName, kubeProxyConfKey, func(env *engine.Env, cur string, exists bool) (string, error) {
		if !exists {
			return "", fmt.Errorf("ConfigMap kube-proxy has no %s key", kubeProxyConfKey)
		}
		out, err := kubeproxyconf.CommentOutKubeconfig(cur)
		if err != nil {
			return "", err
		}
		old, err := env.ServerOlderThan(1, 22)
		if err != nil || !old {
			return out, err
		}
		return kubeproxyconf.EnableEndpointSliceProxyingOff(out)
	})
	step := fieldStep("kube-proxy", "clientConnection.kubeconfig commented out (kube-proxy uses the in-cluster config yurthub serves); rolling restart done",
		edit, restartKubeProxy)
	return skipWhere(step, func(ctx context.Context, env *engine.Env, ss *engine.StepState) (string, error) {
		// What install began is finished whatever it finds now.
		if _, ours := ss.Records[edit.Key]; ours {
			return "", nil
		}
		return kubeProxySkipReason(ctx, env, edit)
	})
}

// kubeProxySkipReason says why the kube-proxy step must not edit, or "":
//   - clientConnection.kubeconfig is already commented out or empty: kube-proxy
//     already uses the in-cluster config (yurthub >= v1.2 does this itself
//     for kube-proxy, with its inclusterconfig filter);
//   - a node does not run yurthub (the mirror pod of its static pod,
//     kube-system/yurt-hub-<node> or yurt-hub-cloud-<node>): kube-proxy there
//     would reach the apiserver through the kubernetes Service, whose rules
//     it programs itself, and could not recover from an apiserver restart.
func kubeProxySkipReason(ctx context.Context, env *engine.Env, edit kube.FieldEdit) (string, error) {
	conf, exists, err := edit.Get(ctx, env)
	if err != nil || !exists {
		return "", err // the edit reports it
	}
	if _, err := kubeproxyconf.CommentOutKubeconfig(conf); err != nil {
		return "", err
	}
	if kubeconfig, _ := kubeproxyconf.KubeProxyKubeconfig(conf); kubeconfig == "" {
		return "clientConnection.kubeconfig is already commented out or empty: kube-proxy already uses the in-cluster config " +
			"(yurthub >= v1.2 does this for kube-proxy with its inclusterconfig filter)", nil
	}
	nodes := &corev1.NodeList{}
	if err := env.Client.List(ctx, nodes); err != nil {
		return "", fmt.Errorf("listing nodes: %w", err)
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace)); err != nil {
		return "", fmt.Errorf("listing pods: %w", err)
	}
	var without []string
	for _, n := range nodes.Items {
		if !RunsYurthub(&n, pods.Items) {
			without = append(without, n.Name)
		}
	}
	const why = "kube-proxy would reach the apiserver through the kubernetes Service it programs itself and could not recover from an apiserver restart"
	switch {
	case len(without) == len(nodes.Items):
		return "no yurthub found (no mirror pod kube-system/yurt-hub-<node>, no node in a NodePool): " + why, nil
	case len(without) > 0:
		slices.Sort(without)
		return "yurthub does not run on " + strings.Join(without, ", ") + ": there " + why, nil
	}
	return "", nil
}

// RunsYurthub says whether node runs yurthub, given the pods of
// kube-system. yurtadm join (v1.7) runs yurthub as a systemd service, which
// has no mirror pod, on nodes it puts in a NodePool; older installs and the
// chart run the static pod yurt-hub(-cloud)-<node>.
func RunsYurthub(node *corev1.Node, kubeSystemPods []corev1.Pod) bool {
	if _, pooled := node.Labels[nodePoolLabel]; pooled {
		return true
	}
	return slices.ContainsFunc(kubeSystemPods, func(p corev1.Pod) bool {
		return p.Spec.NodeName == node.Name && (p.Name == "yurt-hub-"+node.Name || p.Name == "yurt-hub-cloud-"+node.Name)
	})
}

// restartKubeProxy rolls the DaemonSet as `kubectl rollout restart` does,
// and waits until the new pods are Ready on every Ready node: kube-proxy
// reads its config only at start.
func restartKubeProxy(ctx context.Context, env *engine.Env) error {
	ds := &appsv1.DaemonSet{}
	if err := env.Client.Get(ctx, kube.Key(kubeProxyName), ds); err != nil {
		return fmt.Errorf("reading DaemonSet kube-proxy: %w", err)
	}
	patch := client.MergeFrom(ds.DeepCopy())
	if ds.Spec.Template.Annotations == nil {
		ds.Spec.Template.Annotations = map[string]string{}
	}
	// Nanoseconds (kubectl writes whole seconds): a revert right after an
	// install, within the same second, must still change the template.
	ds.Spec.Template.Annotations[restartedAtKey] = time.Now().UTC().Format(time.RFC3339Nano)
	if err := env.Client.Patch(ctx, ds, patch); err != nil {
		return err
	}
	var notReady, podIPs []string
	return kubewait.For(ctx, env.Options.Timeout, "kube-proxy's rolling restart not done", kube.DaemonSetOnReadyNodes(env, kubeProxyName, &notReady, &podIPs))
}
