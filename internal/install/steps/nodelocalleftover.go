package steps

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/nodelocal/leftover"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeletWindows are the recorded nodes' windows in which their kubelets
// gave new pods the node-local address (a node never switched has none).
func kubeletWindows(ss *engine.StepState) map[string]leftover.Window {
	windows := map[string]leftover.Window{}
	for _, r := range ss.Records {
		k := r.Kubelet
		if k == nil || k.Since == nil {
			continue
		}
		w := leftover.Window{Since: k.Since.Time}
		if k.Until != nil {
			w.Until = k.Until.Time
		}
		windows[k.Node] = w
	}
	return windows
}

// strandedPods are, per node, the pods that resolve at the node-local
// address (leftover.Strands) but those revert itself makes anew later in the
// same run (revertRestartsIt).
func strandedPods(ctx context.Context, env *engine.Env, windows map[string]leftover.Window) (map[string][]string, error) {
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	stranded := map[string][]string{}
	for _, p := range pods.Items {
		if w, ok := windows[p.Spec.NodeName]; ok && w.Strands(&p) && !revertRestartsIt(&p) {
			stranded[p.Spec.NodeName] = append(stranded[p.Spec.NodeName], p.Namespace+"/"+p.Name)
		}
	}
	return stranded, nil
}

// handOverToLeftover runs the leftover forwarder on the nodes where pods
// still resolve at the node-local address, and waits for it to be Ready on
// each (its readiness probe asks it on the address itself), so the address
// never goes dark when the caches go. The ClusterRole is made first: it
// owns every other object of the leftover, so that the linger's one delete
// of it takes them all.
func handOverToLeftover(ctx context.Context, env *engine.Env, ss *engine.StepState, stranded map[string][]string, windows map[string]leftover.Window) (string, error) {
	nodes := slices.Sorted(maps.Keys(stranded))
	// The addresses the pods there resolve at: those each node was set up
	// with.
	var addrs []netip.Addr
	for _, n := range nodes {
		addrs = unionAddresses(addrs, recordedAddresses(ss.Records[kubeletRecordKey(n)].Kubelet))
	}
	var each []string
	for _, n := range nodes {
		pods := stranded[n]
		slices.Sort(pods)
		shown := strings.Join(pods[:min(10, len(pods))], ", ")
		if len(pods) > 10 {
			shown += fmt.Sprintf(" and %d more", len(pods)-10)
		}
		each = append(each, fmt.Sprintf("%s: %s", n, shown))
	}
	summary := fmt.Sprintf("pods made under node-local DNS still resolve at %s (%s): handed the address over to DaemonSet %s/%s on %s, "+
		"which goes by itself once they are gone (restart them to hasten it)",
		addrList(addrs), strings.Join(each, "; "), tunnelnodes.Namespace, leftover.Name, strings.Join(nodes, ", "))
	if env.Options.DryRun {
		return summary, nil
	}
	lingering := map[string]leftover.Window{}
	for _, n := range nodes {
		lingering[n] = windows[n]
	}
	images, err := leftoverImages(ctx, env)
	if err != nil {
		return "", err
	}
	objs, err := leftoverObjects(images, lingering, addrs)
	if err != nil {
		return "", err
	}
	var owner types.UID
	for _, o := range objs {
		if owner != "" {
			setOwner(o, owner)
		}
		if _, _, err := kube.Apply(ctx, env, ss, o); err != nil {
			return "", err
		}
		if o.GetKind() == "ClusterRole" {
			cr := &rbacv1.ClusterRole{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: leftover.ClusterRole}, cr); err != nil {
				return "", fmt.Errorf("reading ClusterRole %s: %w", leftover.ClusterRole, err)
			}
			owner = cr.UID
		}
	}
	for _, n := range nodes {
		if err := kubewait.For(ctx, env.Options.Timeout, "leftover forwarder on node "+n+" not Ready", podReadyOn(env, leftover.App, n)); err != nil {
			return "", err
		}
	}
	return summary, nil
}

// leftoverImages are the images of the running caches (revert has no
// --coredns-image, and these are on the nodes already), else those of a
// leftover an earlier revert made, else --sync-image's and deploy/'s.
func leftoverImages(ctx context.Context, env *engine.Env) (images map[string]string, err error) {
	for _, name := range []string{nodeLocalDNS, leftover.Name} {
		ds := &appsv1.DaemonSet{}
		err := env.Client.Get(ctx, kube.Key(name), ds)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading DaemonSet %s: %w", name, err)
		}
		images = map[string]string{}
		for _, c := range slices.Concat(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers) {
			images[c.Name] = c.Image
		}
		images["linger"] = images["setup"]
		return images, nil
	}
	sync, err := kube.SyncImage(env)
	return map[string]string{"setup": sync, "linger": sync}, err
}

// leftoverObjects are deploy/node-local-dns-leftover with images (by
// container name), the lingering nodes' windows in the ConfigMap, and the
// DaemonSet pinned to those nodes; the ClusterRole, which owns the rest,
// comes first.
// It binds every node-local address of addrs, health and ready on the first.
func leftoverObjects(images map[string]string, lingering map[string]leftover.Window, addrs []netip.Addr) ([]*unstructured.Unstructured, error) {
	objs, err := deploy.Render(deploy.NodeLocalDNSLeftover)
	if err != nil {
		return nil, err
	}
	// One term per node (terms are ORed): a metadata.name field selector
	// takes a single value.
	var terms []any
	for _, n := range slices.Sorted(maps.Keys(lingering)) {
		terms = append(terms, map[string]any{"matchFields": []any{map[string]any{
			"key": "metadata.name", "operator": "In", "values": []any{n}}}})
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			if src, ok, _ := unstructured.NestedString(o.Object, "data", "Corefile"); ok {
				if err := unstructured.SetNestedField(o.Object, corefileAddresses(src, addrs), "data", "Corefile"); err != nil {
					return nil, err
				}
			}
			for n, w := range lingering {
				if err := unstructured.SetNestedField(o.Object, w.Encode(), "data", n); err != nil {
					return nil, err
				}
			}
		case "DaemonSet":
			spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			daemonSetAddresses(spec, addrs)
			for _, field := range []string{"initContainers", "containers"} {
				containers, _ := spec[field].([]any)
				for _, c := range containers {
					if image := images[c.(map[string]any)["name"].(string)]; image != "" {
						c.(map[string]any)["image"] = image
					}
				}
			}
			spec["affinity"] = map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
				"nodeSelectorTerms": terms}}}
			if err := unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec"); err != nil {
				return nil, err
			}
		}
	}
	i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ClusterRole" })
	if i < 0 {
		return nil, fmt.Errorf("deploy/%s has no ClusterRole", deploy.NodeLocalDNSLeftover)
	}
	cr := objs[i]
	return append([]*unstructured.Unstructured{cr}, slices.Delete(objs, i, i+1)...), nil
}

// setOwner makes the ClusterRole o's owner; the garbage collector deletes o
// once the ClusterRole is gone (a namespaced object may have a
// cluster-scoped owner). Not blocking: nothing waits on a foreground delete.
func setOwner(o *unstructured.Unstructured, uid types.UID) {
	o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole",
		Name: leftover.ClusterRole, UID: uid, BlockOwnerDeletion: new(false)}})
}

// leftoverStatus says which nodes the leftover forwarder still serves and
// how many pods there resolve at the address ("" when there is none).
func leftoverStatus(ctx context.Context, env *engine.Env) (string, error) {
	cm := &corev1.ConfigMap{}
	err := env.Client.Get(ctx, kube.Key(leftover.Name), cm)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading ConfigMap %s: %w", leftover.Name, err)
	}
	windows, err := leftover.Windows(cm.Data)
	if err != nil {
		return "", err
	}
	stranded, err := strandedPods(ctx, env, windows)
	if err != nil {
		return "", err
	}
	var nodes []string
	for _, n := range slices.Sorted(maps.Keys(windows)) {
		nodes = append(nodes, fmt.Sprintf("%s (%d pods)", n, len(stranded[n])))
	}
	addrs, err := setupAddresses(ctx, env, leftover.Name)
	if err != nil {
		return "", err
	}
	if len(nodes) == 0 {
		return "leftover forwarder on " + addrList(addrs) + " going", nil
	}
	return fmt.Sprintf("leftover forwarder on %s for pods still resolving there: %s; it goes once they are gone", addrList(addrs), strings.Join(nodes, ", ")), nil
}

// takeOverFromLeftover deletes a leftover forwarder of an earlier revert
// once install's caches are Ready on every Ready node: they share the
// address with it (SO_REUSEPORT), so its pods never go dark. The ConfigMap
// goes first: a linger that no longer finds it touches nothing, and none
// tears down a node where a cache pod runs (leftover.Yield). The
// ClusterRole's delete lets the garbage collector take the rest.
func takeOverFromLeftover(ctx context.Context, env *engine.Env) (string, error) {
	cr := &rbacv1.ClusterRole{}
	err := env.Client.Get(ctx, client.ObjectKey{Name: leftover.ClusterRole}, cr)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading ClusterRole %s: %w", leftover.ClusterRole, err)
	}
	addrs, err := setupAddresses(ctx, env, leftover.Name)
	if err != nil {
		return "", err
	}
	summary := fmt.Sprintf("took %s over from the leftover forwarder of the last revert (ClusterRole %s deleted, the garbage collector removes the rest)",
		addrList(addrs), leftover.ClusterRole)
	if env.Options.DryRun {
		return summary, nil
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: leftover.Name, Namespace: tunnelnodes.Namespace}}
	if err := env.Client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("deleting ConfigMap %s: %w", leftover.Name, err)
	}
	if err := env.Client.Delete(ctx, cr, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("deleting ClusterRole %s: %w", leftover.ClusterRole, err)
	}
	return summary, nil
}
