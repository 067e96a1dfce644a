package install

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of the kubeadm objects install changes.
const (
	corednsName      = "coredns"
	corefileKey      = "Corefile"
	kubeDNSService   = "kube-dns"
	kubeProxyName    = "kube-proxy"
	kubeProxyConfKey = "config.conf"
	topologyKey      = "openyurt.io/topologyKeys"
	topologyValue    = "openyurt.io/nodepool"
	restartedAtKey   = "kubectl.kubernetes.io/restartedAt"
)

// corednsYurtConfigMap holds the DaemonSet's Corefile: the stock one is never edited.
const corednsYurtConfigMap = "coredns-yurt"

func key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: tunnelnodes.Namespace, Name: name}
}

// toUnstructured converts a typed object for the generic create/delete helpers.
func toUnstructured(obj runtime.Object, apiVersion, kind string) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err) // typed API objects always convert
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u
}

// namedObject is a reference to an object for existence checks and deletes.
func namedObject(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(tunnelnodes.Namespace)
	u.SetName(name)
	return u
}

// objectsStep creates a fixed set of objects and deletes them on revert.
func objectsStep(name string, objects func(*Env) ([]*unstructured.Unstructured, error)) Step {
	return Step{
		Name: name,
		Install: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			objs, err := objects(env)
			if err != nil {
				return Result{}, err
			}
			var res Result
			var created []string
			for _, o := range objs {
				changed, diff, err := ensureCreated(ctx, env, ss, o)
				if err != nil {
					return Result{}, err
				}
				if changed {
					created = append(created, objectKey(o))
					res.Diffs = append(res.Diffs, diff)
				}
			}
			res.Changed = len(created) > 0
			res.Summary = "already applied"
			if res.Changed {
				res.Summary = "created " + strings.Join(created, ", ")
			}
			return res, nil
		},
		Revert: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			objs, err := objects(env)
			if err != nil {
				return Result{}, err
			}
			var deleted []string
			for i := len(objs) - 1; i >= 0; i-- {
				ok, err := deleteCreated(ctx, env, ss, objs[i])
				if err != nil {
					return Result{}, err
				}
				if ok {
					deleted = append(deleted, objectKey(objs[i]))
				}
			}
			if len(deleted) == 0 {
				return Result{Summary: "nothing to delete"}, nil
			}
			return Result{Changed: true, Summary: "deleted " + strings.Join(deleted, ", ")}, nil
		},
		Status: func(ctx context.Context, env *Env, ss *stepState) (StepStatus, string, error) {
			objs, err := objects(env)
			if err != nil {
				return "", "", err
			}
			all, err := existsAll(ctx, env, objs)
			switch {
			case err != nil:
				return "", "", err
			case all:
				return Applied, "", nil
			case ss.Applied:
				return Drifted, "objects install created are missing", nil
			}
			return NotApplied, "", nil
		},
	}
}

// rbacStep lets CoreDNS's ServiceAccount read the records ConfigMap and the
// tunnel Service, each by name only: deploy/coredns-yurt/rbac.
func rbacStep() Step {
	return objectsStep("rbac", func(*Env) ([]*unstructured.Unstructured, error) {
		return deploy.Render(deploy.CoreDNSRBAC)
	})
}

// syncImage is --sync-image, else the image deploy/ names.
func syncImage(env *Env) (string, error) {
	if env.Options.SyncImage != "" {
		return env.Options.SyncImage, nil
	}
	objs, err := deploy.Render(deploy.TunnelNodesSync)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if len(containers) > 0 {
			if image, ok := containers[0].(map[string]any)["image"].(string); ok {
				return image, nil
			}
		}
	}
	return "", fmt.Errorf("deploy/%s has no Deployment image", deploy.TunnelNodesSync)
}

// syncStep deploys tunnel-nodes-sync from deploy/, as `kubectl apply -k` would.
func syncStep() Step {
	return objectsStep("sync", func(env *Env) ([]*unstructured.Unstructured, error) {
		objs, err := deploy.Render(deploy.TunnelNodesSync)
		if err != nil {
			return nil, err
		}
		if env.Options.SyncImage != "" {
			for _, o := range objs {
				if o.GetKind() != "Deployment" {
					continue
				}
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				for _, c := range containers {
					c.(map[string]any)["image"] = env.Options.SyncImage
				}
				if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
					return nil, err
				}
			}
		}
		return objs, nil
	})
}

// configMapKeyEdit edits one key of a kube-system ConfigMap.
func configMapKeyEdit(name, dataKey string, desired func(*Env, string, bool) (string, error)) fieldEdit {
	return fieldEdit{
		key: fmt.Sprintf("ConfigMap %s/%s %s", tunnelnodes.Namespace, name, dataKey),
		get: func(ctx context.Context, env *Env) (string, bool, error) {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, key(name), cm); err != nil {
				return "", false, fmt.Errorf("reading ConfigMap %s: %w", name, err)
			}
			v, ok := cm.Data[dataKey]
			return v, ok, nil
		},
		set: func(ctx context.Context, env *Env, value string, exists bool) error {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, key(name), cm); err != nil {
				return err
			}
			if exists {
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				cm.Data[dataKey] = value
			} else {
				delete(cm.Data, dataKey)
			}
			return env.Client.Update(ctx, cm)
		},
		desired: desired,
	}
}

// fieldStep is a step made of one fieldEdit, with an optional action after
// the value changed (install or revert).
func fieldStep(name, what string, f fieldEdit, after func(context.Context, *Env) error) Step {
	run := func(ctx context.Context, env *Env, changed bool) error {
		if !changed || env.Options.DryRun || after == nil {
			return nil
		}
		return after(ctx, env)
	}
	return Step{
		Name: name,
		Install: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			// A record of the value without the step applied: an earlier
			// install wrote it (or was about to) and was interrupted, maybe
			// before the action after the write, which must run now.
			_, interrupted := ss.Records[f.key]
			interrupted = interrupted && !ss.Applied
			changed, diff, err := f.install(ctx, env, ss)
			if err != nil {
				return Result{}, err
			}
			if err := run(ctx, env, changed || interrupted); err != nil {
				return Result{}, err
			}
			switch {
			case changed:
				return Result{Changed: true, Summary: what, Diffs: []string{diff}}, nil
			case interrupted && after != nil:
				return Result{Changed: true, Summary: what + " (completing an interrupted install)"}, nil
			}
			return Result{Summary: "already applied"}, nil
		},
		Revert: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			changed, note, err := f.revert(ctx, env, ss)
			if err != nil {
				return Result{}, err
			}
			// The original value back after a revert began restoring it: that
			// revert was interrupted, maybe before the action after the
			// write, which must run now.
			interrupted := !changed && note == "" && ss.Records[f.key].Restoring
			if err := run(ctx, env, changed || interrupted); err != nil {
				return Result{}, err
			}
			if interrupted && after != nil {
				return Result{Changed: true, Summary: "restored " + f.key + " (completing an interrupted revert)"}, nil
			}
			if !changed {
				if note == "" {
					note = "nothing to restore"
				}
				return Result{Summary: note}, nil
			}
			return Result{Changed: true, Summary: "restored " + f.key}, nil
		},
		Status: f.status,
	}
}

// corefileStep writes the DaemonSet's own ConfigMap coredns-yurt: the stock
// Corefile with yurthosts. The stock coredns ConfigMap is never edited, so
// the stock Deployment is never handed a Corefile it cannot parse (stock
// CoreDNS crash-loops on yurthosts), whatever moment install or revert stops.
func corefileStep() Step {
	// yurtCorefile is the stock Corefile with the yurthosts edit, as it is now.
	yurtCorefile := func(ctx context.Context, env *Env) (stock, yurt string, err error) {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, key(corednsName), cm); err != nil {
			return "", "", fmt.Errorf("reading ConfigMap coredns: %w", err)
		}
		stock, ok := cm.Data[corefileKey]
		if !ok {
			return "", "", fmt.Errorf("ConfigMap coredns has no Corefile key")
		}
		yurt, _, err = EnsureYurthosts(stock)
		return stock, yurt, err
	}
	copyKey := "ConfigMap " + tunnelnodes.Namespace + "/" + corednsYurtConfigMap + " " + corefileKey
	yurtConfigMap := func(corefile string) *unstructured.Unstructured {
		return toUnstructured(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: corednsYurtConfigMap, Namespace: tunnelnodes.Namespace},
			Data:       map[string]string{corefileKey: corefile},
		}, "v1", "ConfigMap")
	}
	return Step{
		Name: "corefile",
		Install: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			stock, want, err := yurtCorefile(ctx, env)
			if err != nil {
				return Result{}, err
			}
			created, _, err := ensureCreated(ctx, env, ss, yurtConfigMap(want))
			switch {
			case err != nil:
				return Result{}, err
			case created:
				// The diff that says what the copy is: the edit of the stock Corefile.
				diff := unifiedDiff(copyKey+" (from ConfigMap "+tunnelnodes.Namespace+"/"+corednsName+")", []byte(stock), []byte(want))
				return Result{Changed: true, Diffs: []string{diff}, Summary: "ConfigMap " + tunnelnodes.Namespace + "/" + corednsYurtConfigMap +
					" created: the stock Corefile with yurthosts { fallthrough } in the .:53 block (the coredns ConfigMap is not edited)"}, nil
			}
			// It exists: carry over a change of the stock Corefile since.
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, key(corednsYurtConfigMap), cm); err != nil {
				return Result{}, fmt.Errorf("reading ConfigMap %s: %w", corednsYurtConfigMap, err)
			}
			if cm.Data[corefileKey] == want {
				return Result{Summary: "already applied"}, nil
			}
			diff := unifiedDiff(copyKey, []byte(cm.Data[corefileKey]), []byte(want))
			if !env.Options.DryRun {
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				cm.Data[corefileKey] = want
				if err := env.Client.Update(ctx, cm); err != nil {
					return Result{}, fmt.Errorf("updating ConfigMap %s: %w", corednsYurtConfigMap, err)
				}
			}
			return Result{Changed: true, Diffs: []string{diff}, Summary: "ConfigMap " + tunnelnodes.Namespace + "/" + corednsYurtConfigMap +
				" updated: carries over the stock Corefile's changes since install"}, nil
		},
		// The DaemonSet that read it is gone by now (revert runs backwards).
		Revert: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			deleted, err := deleteCreated(ctx, env, ss, namedObject("v1", "ConfigMap", corednsYurtConfigMap))
			if err != nil || !deleted {
				return Result{Summary: "nothing to delete"}, err
			}
			return Result{Changed: true, Summary: "deleted ConfigMap " + tunnelnodes.Namespace + "/" + corednsYurtConfigMap}, nil
		},
		Status: func(ctx context.Context, env *Env, ss *stepState) (StepStatus, string, error) {
			cm := &corev1.ConfigMap{}
			err := env.Client.Get(ctx, key(corednsYurtConfigMap), cm)
			switch {
			case apierrors.IsNotFound(err) && ss.Applied:
				return Drifted, "ConfigMap " + corednsYurtConfigMap + " is missing", nil
			case apierrors.IsNotFound(err):
				return NotApplied, "", nil
			case err != nil:
				return "", "", err
			}
			_, want, err := yurtCorefile(ctx, env)
			switch {
			case err != nil:
				return Drifted, err.Error(), nil
			case cm.Data[corefileKey] != want:
				return Drifted, "the stock Corefile changed after install (run install again to carry it over into ConfigMap " + corednsYurtConfigMap + ")", nil
			}
			return Applied, "", nil
		},
	}
}

func kubeDNSTopologyStep() Step {
	edit := fieldEdit{
		key: fmt.Sprintf("Service %s/%s annotation %s", tunnelnodes.Namespace, kubeDNSService, topologyKey),
		get: func(ctx context.Context, env *Env) (string, bool, error) {
			svc := &corev1.Service{}
			if err := env.Client.Get(ctx, key(kubeDNSService), svc); err != nil {
				return "", false, fmt.Errorf("reading Service kube-dns: %w", err)
			}
			v, ok := svc.Annotations[topologyKey]
			return v, ok, nil
		},
		set: func(ctx context.Context, env *Env, value string, exists bool) error {
			svc := &corev1.Service{}
			if err := env.Client.Get(ctx, key(kubeDNSService), svc); err != nil {
				return err
			}
			if svc.Annotations == nil {
				svc.Annotations = map[string]string{}
			}
			if exists {
				svc.Annotations[topologyKey] = value
			} else {
				delete(svc.Annotations, topologyKey)
			}
			return env.Client.Update(ctx, svc)
		},
		desired: func(*Env, string, bool) (string, error) { return topologyValue, nil },
	}
	return fieldStep("kube-dns-topology", "kube-dns answers within the node pool ("+topologyKey+": "+topologyValue+")", edit, nil)
}

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

// corednsDaemonSetStep runs CoreDNS as a DaemonSet on every node (so edge
// nodes resolve locally when cut off), and scales the Deployment to 0 only
// once the DaemonSet's pods are Ready on every Ready node and are ready
// endpoints of kube-dns: DNS never goes dark. NotReady nodes (normal for a
// cut-off edge node) do not block; they are named.
func corednsDaemonSetStep() Step {
	replicas := fieldEdit{
		key: fmt.Sprintf("Deployment %s/%s replicas", tunnelnodes.Namespace, corednsName),
		get: func(ctx context.Context, env *Env) (string, bool, error) {
			d := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, key(corednsName), d); err != nil {
				return "", false, fmt.Errorf("reading Deployment coredns: %w", err)
			}
			n := int32(1)
			if d.Spec.Replicas != nil {
				n = *d.Spec.Replicas
			}
			return strconv.Itoa(int(n)), true, nil
		},
		set: func(ctx context.Context, env *Env, value string, _ bool) error {
			n, err := strconv.Atoi(value)
			if err != nil {
				return err
			}
			d := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, key(corednsName), d); err != nil {
				return err
			}
			patch := client.MergeFrom(d.DeepCopy())
			d.Spec.Replicas = new(int32(n))
			return env.Client.Patch(ctx, d, patch)
		},
		desired: func(*Env, string, bool) (string, error) { return "0", nil },
	}
	daemonSet := func(ctx context.Context, env *Env) (*unstructured.Unstructured, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key(corednsName), d); err != nil {
			return nil, fmt.Errorf("reading Deployment coredns: %w", err)
		}
		ds, err := daemonSetFromDeployment(d, env.Options.CoreDNSImage)
		if err != nil {
			return nil, err
		}
		return toUnstructured(ds, "apps/v1", "DaemonSet"), nil
	}
	return Step{
		Name: "coredns-daemonset",
		Install: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			ds, err := daemonSet(ctx, env)
			if err != nil {
				return Result{}, err
			}
			createdDS, dsDiff, err := ensureCreated(ctx, env, ss, ds)
			if err != nil {
				return Result{}, err
			}
			var res Result
			if createdDS {
				res.Diffs = append(res.Diffs, dsDiff)
			}
			var notReady []string
			if !env.Options.DryRun {
				// Live before the Deployment goes: a Ready pod on every Ready
				// node, each a ready endpoint of kube-dns.
				var podIPs []string
				err := waitFor(ctx, env.Options.Timeout, "DaemonSet coredns not serving on every Ready node",
					both(daemonSetOnReadyNodes(env, corednsName, &notReady, &podIPs), serviceEndpointsReady(env, kubeDNSService, &podIPs)))
				if err != nil {
					return Result{}, fmt.Errorf("%w; the coredns Deployment is left as it was", err)
				}
			}
			scaled, diff, err := replicas.install(ctx, env, ss)
			if err != nil {
				return Result{}, err
			}
			if scaled {
				res.Diffs = append(res.Diffs, diff)
			}
			res.Changed = createdDS || scaled
			switch {
			case !res.Changed:
				res.Summary = "already applied"
			default:
				res.Summary = "DaemonSet coredns Ready on every Ready node and behind kube-dns; Deployment coredns scaled to 0"
			}
			if len(notReady) > 0 {
				res.Summary += " (NotReady nodes not waited for: " + strings.Join(notReady, ", ") + ")"
			}
			return res, nil
		},
		Revert: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			scaled, note, err := replicas.revert(ctx, env, ss)
			if err != nil {
				return Result{}, err
			}
			// Restoring: this revert scaled the Deployment back, or an earlier
			// one did and was interrupted before it was available.
			// The Deployment serves (its pods are ready endpoints of kube-dns)
			// before the DaemonSet goes: DNS keeps answering.
			if ss.Records[replicas.key].Restoring && !env.Options.DryRun {
				var podIPs []string
				err := waitFor(ctx, env.Options.Timeout, "Deployment coredns not available",
					both(deploymentServing(env, corednsName, &podIPs), serviceEndpointsReady(env, kubeDNSService, &podIPs)))
				if err != nil {
					return Result{}, fmt.Errorf("%w; the coredns DaemonSet is kept so DNS keeps answering", err)
				}
			}
			deleted, err := deleteCreated(ctx, env, ss, namedObject("apps/v1", "DaemonSet", corednsName))
			if err != nil {
				return Result{}, err
			}
			summary := "Deployment coredns scaled back, available and behind kube-dns; DaemonSet coredns deleted"
			if note != "" {
				summary = note
			}
			return Result{Changed: scaled || deleted, Summary: summary}, nil
		},
		Status: func(ctx context.Context, env *Env, ss *stepState) (StepStatus, string, error) {
			exists, err := existsAll(ctx, env, []*unstructured.Unstructured{namedObject("apps/v1", "DaemonSet", corednsName)})
			if err != nil {
				return "", "", err
			}
			s, detail, err := replicas.status(ctx, env, ss)
			if err != nil {
				return "", "", err
			}
			switch {
			case exists && s == Applied:
				return Applied, "", nil
			case ss.Applied:
				return Drifted, strings.TrimSpace("DaemonSet or Deployment changed after install " + detail), nil
			}
			return NotApplied, "", nil
		},
	}
}

// nonRootUser is the user the coredns-yurt image runs as (distroless's
// "nonroot", like the stock CoreDNS image).
const nonRootUser = int64(65532)

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
		return v.ConfigMap != nil && v.ConfigMap.Name == corednsName
	})
	if corefileVolume < 0 {
		return nil, fmt.Errorf("Deployment coredns has no volume from ConfigMap coredns: unknown layout")
	}
	tmpl.Spec.Volumes[corefileVolume].ConfigMap.Name = corednsYurtConfigMap
	for i := range tmpl.Spec.Containers {
		c := &tmpl.Spec.Containers[i]
		if c.Name != corednsName {
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
		hardenContainer(c)
	}
	if !found {
		return nil, fmt.Errorf("Deployment coredns has no container named coredns: unknown layout")
	}
	hardenPod(&tmpl.Spec)
	tmpl.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	maxUnavailable := intstr.FromString("10%")
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: corednsName, Namespace: tunnelnodes.Namespace, Labels: d.Labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: d.Spec.Selector,
			Template: *tmpl,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable},
			},
		},
	}, nil
}

// hardenPod fills in the pod-level security settings the template leaves
// unset: user and group 65532, runAsNonRoot (unless a user is set to root
// explicitly), the RuntimeDefault seccomp profile.
func hardenPod(spec *corev1.PodSpec) {
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

// hardenContainer fills in the container security settings the template
// leaves unset: no privilege escalation, read-only root filesystem, every
// capability dropped (added ones are kept).
func hardenContainer(c *corev1.Container) {
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
