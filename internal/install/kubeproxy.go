package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names the kube-proxy step works with.
const (
	kubeProxyName    = "kube-proxy"
	kubeProxyConfKey = "config.conf"
	restartedAtKey   = "kubectl.kubernetes.io/restartedAt"
)

// kubeProxyStep makes kube-proxy use the in-cluster config, which yurthub
// serves on OpenYurt nodes (pointing at itself, so kube-proxy keeps working
// while the node is cut off). It only applies where yurthub runs: see
// kubeProxySkipReason.
func kubeProxyStep() Step {
	edit := configMapKeyEdit(kubeProxyName, kubeProxyConfKey, func(env *Env, cur string, exists bool) (string, error) {
		if !exists {
			return "", fmt.Errorf("ConfigMap kube-proxy has no %s key", kubeProxyConfKey)
		}
		out, err := CommentOutKubeconfig(cur)
		if err != nil {
			return "", err
		}
		old, err := env.serverOlderThan(1, 22)
		if err != nil || !old {
			return out, err
		}
		return EnableEndpointSliceProxyingOff(out)
	})
	step := fieldStep("kube-proxy", "clientConnection.kubeconfig commented out (kube-proxy uses the in-cluster config yurthub serves); rolling restart done",
		edit, restartKubeProxy)
	install, status := step.Install, step.Status
	step.Install = func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
		// What install began is finished whatever it finds now.
		if _, ours := ss.Records[edit.key]; !ours {
			reason, err := kubeProxySkipReason(ctx, env, edit)
			if err != nil || reason != "" {
				return Result{Skipped: true, Summary: "skipped: " + reason}, err
			}
		}
		return install(ctx, env, ss)
	}
	step.Status = func(ctx context.Context, env *Env, ss *stepState) (StepStatus, string, error) {
		s, detail, err := status(ctx, env, ss)
		if err != nil || s != NotApplied || ss.Applied {
			return s, detail, err
		}
		if reason, err := kubeProxySkipReason(ctx, env, edit); err == nil && reason != "" {
			detail = "skipped by install: " + reason
		}
		return s, detail, nil
	}
	return step
}

// kubeProxySkipReason says why the kube-proxy step must not edit, or "":
//   - clientConnection.kubeconfig is already commented out or empty: kube-proxy
//     already uses the in-cluster config (yurthub >= v1.2 does this itself
//     for kube-proxy, with its inclusterconfig filter);
//   - a node does not run yurthub (the mirror pod of its static pod,
//     kube-system/yurt-hub-<node> or yurt-hub-cloud-<node>): kube-proxy there
//     would reach the apiserver through the kubernetes Service, whose rules
//     it programs itself, and could not recover from an apiserver restart.
func kubeProxySkipReason(ctx context.Context, env *Env, edit fieldEdit) (string, error) {
	conf, exists, err := edit.get(ctx, env)
	if err != nil || !exists {
		return "", err // the edit reports it
	}
	if _, err := CommentOutKubeconfig(conf); err != nil {
		return "", err
	}
	if kubeconfig, _ := kubeProxyKubeconfig(conf); kubeconfig == "" {
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
		if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
			return p.Spec.NodeName == n.Name && (p.Name == "yurt-hub-"+n.Name || p.Name == "yurt-hub-cloud-"+n.Name)
		}) {
			without = append(without, n.Name)
		}
	}
	const why = "kube-proxy would reach the apiserver through the kubernetes Service it programs itself and could not recover from an apiserver restart"
	switch {
	case len(without) == len(nodes.Items):
		return "no yurthub found (no mirror pod kube-system/yurt-hub-<node>): " + why, nil
	case len(without) > 0:
		slices.Sort(without)
		return "yurthub does not run on " + strings.Join(without, ", ") + ": there " + why, nil
	}
	return "", nil
}

// restartKubeProxy rolls the DaemonSet as `kubectl rollout restart` does,
// and waits until the new pods are Ready on every Ready node: kube-proxy
// reads its config only at start.
func restartKubeProxy(ctx context.Context, env *Env) error {
	ds := &appsv1.DaemonSet{}
	if err := env.Client.Get(ctx, key(kubeProxyName), ds); err != nil {
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
	return waitFor(ctx, env.Options.Timeout, "kube-proxy's rolling restart not done", daemonSetOnReadyNodes(env, kubeProxyName, &notReady, &podIPs))
}

// CommentOutKubeconfig comments out clientConnection.kubeconfig in a
// kube-proxy config.conf, so kube-proxy uses the in-cluster config (which
// yurthub rewrites to itself on edge nodes). Only that one line changes, so
// revert restores the text byte for byte. Already commented: unchanged.
func CommentOutKubeconfig(conf string) (string, error) {
	root, err := parseKubeProxyConf(conf)
	if err != nil {
		return "", err
	}
	cc := mapValue(root, "clientConnection")
	if cc == nil || cc.Tag == "!!null" {
		return conf, nil
	}
	if cc.Kind != yaml.MappingNode || cc.Style&yaml.FlowStyle != 0 {
		return "", fmt.Errorf("kube-proxy config.conf: clientConnection has an unexpected layout")
	}
	var keyNode *yaml.Node
	for i := 0; i+1 < len(cc.Content); i += 2 {
		if cc.Content[i].Value == "kubeconfig" {
			keyNode = cc.Content[i]
		}
	}
	if keyNode == nil {
		return conf, nil
	}
	lines := strings.SplitAfter(conf, "\n")
	i := keyNode.Line - 1
	if i < 0 || i >= len(lines) {
		return "", fmt.Errorf("kube-proxy config.conf: cannot locate clientConnection.kubeconfig")
	}
	line := lines[i]
	col := keyNode.Column - 1
	if col < 0 || col > len(line) || !strings.HasPrefix(line[col:], "kubeconfig") {
		return "", fmt.Errorf("kube-proxy config.conf: unexpected layout around clientConnection.kubeconfig")
	}
	lines[i] = line[:col] + "#" + line[col:]
	return strings.Join(lines, ""), nil
}

// kubeProxyKubeconfig is clientConnection.kubeconfig of a kube-proxy
// config.conf ("" when unset, empty or commented out).
func kubeProxyKubeconfig(conf string) (string, error) {
	root, err := parseKubeProxyConf(conf)
	if err != nil {
		return "", err
	}
	v := mapValue(mapValue(root, "clientConnection"), "kubeconfig")
	if v == nil || v.Tag == "!!null" {
		return "", nil
	}
	return v.Value, nil
}

// EnableEndpointSliceProxyingOff adds featureGates.EndpointSliceProxying:
// false to a kube-proxy config.conf. Servers older than 1.22 need it: their
// kube-proxy watches EndpointSlices, which yurthub did not serve then.
// Already present: unchanged. Only lines are added, so revert restores the
// text byte for byte.
func EnableEndpointSliceProxyingOff(conf string) (string, error) {
	root, err := parseKubeProxyConf(conf)
	if err != nil {
		return "", err
	}
	gates := mapValue(root, "featureGates")
	const gate = "EndpointSliceProxying"
	switch {
	case gates == nil:
		sep := "\n"
		if conf == "" || strings.HasSuffix(conf, "\n") {
			sep = ""
		}
		return conf + sep + "featureGates:\n  " + gate + ": false\n", nil
	case gates.Kind != yaml.MappingNode || gates.Style&yaml.FlowStyle != 0:
		return "", fmt.Errorf("kube-proxy config.conf: featureGates has an unexpected layout")
	case mapValue(gates, gate) != nil:
		if v := mapValue(gates, gate); v.Value != "false" {
			return "", fmt.Errorf("kube-proxy config.conf sets %s: %s; it must be false on this server", gate, v.Value)
		}
		return conf, nil
	}
	// Insert as the first entry under featureGates, indented like the others.
	lines := strings.SplitAfter(conf, "\n")
	indent := strings.Repeat(" ", gates.Content[0].Column-1)
	at := gates.Content[0].Line - 1
	lines = append(lines[:at], append([]string{indent + gate + ": false\n"}, lines[at:]...)...)
	return strings.Join(lines, ""), nil
}

// parseKubeProxyConf returns the top-level mapping of a KubeProxyConfiguration.
func parseKubeProxyConf(conf string) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(conf), &doc); err != nil {
		return nil, fmt.Errorf("kube-proxy config.conf is not YAML: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode || doc.Content[0].Style&yaml.FlowStyle != 0 {
		return nil, fmt.Errorf("kube-proxy config.conf is not a KubeProxyConfiguration object in block style")
	}
	if kind := mapValue(doc.Content[0], "kind"); kind == nil || kind.Value != "KubeProxyConfiguration" {
		return nil, fmt.Errorf("kube-proxy config.conf is not a KubeProxyConfiguration")
	}
	return doc.Content[0], nil
}
