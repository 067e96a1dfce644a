package steps

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/corefile"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/internal/nodelocal/leftover"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names the node-local-dns step works with.
const (
	nodeLocalDNS       = "node-local-dns"
	kubeletConfigMap   = "kubelet-config"
	kubeletConfigKey   = "kubelet"
	nodeLocalPodLabel  = leftover.AppLabel
	nodeLocalPodLabelV = leftover.CacheApp
)

// nodeLocalDNSStep (with --node-local-dns) runs coredns-yurt as a cache on
// every node at the link-local address (deploy/node-local-dns), then points
// one node's kubelet after another at it, each only once its cache answers
// there, and last kubeadm's kubelet-config ConfigMap, so nodes that join
// later get it too. Revert goes backwards; each kubelet's file comes back
// byte for byte. Where pods made in between still resolve at the address,
// revert hands it to a leftover forwarder before the caches go
// (nodelocalleftover.go), which goes by itself once those pods are gone.
func nodeLocalDNSStep(l layout.Layout) engine.Step {
	objects := func(ctx context.Context, env *engine.Env) ([]*unstructured.Unstructured, error) {
		return nodeLocalObjects(ctx, env, l)
	}
	files := objectsStep(nodeLocalDNS, objects)
	return engine.Step{
		Name:    nodeLocalDNS,
		OptIn:   "--node-local-dns",
		Enabled: func(o engine.Options) bool { return o.NodeLocalDNS },
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			res, err := files.Install(ctx, env, ss)
			if err != nil {
				return engine.Result{}, err
			}
			// A cache of another version (or Corefile) is replaced by a
			// surge pod beside it on the same port: each node keeps a Ready
			// cache on the address throughout.
			if !env.Options.DryRun {
				var notReady, podIPs []string
				if err := kubewait.For(ctx, env.Options.Timeout, "DaemonSet "+nodeLocalDNS+" not rolled out",
					kube.DaemonSetOnReadyNodes(env, nodeLocalDNS, &notReady, &podIPs)); err != nil {
					return engine.Result{}, err
				}
			}
			addrs, err := nodeLocalAddrs(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			tookOver, err := takeOverFromLeftover(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			nodes, notReady, err := readyNodeNames(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			var switched []string
			for _, n := range nodes {
				changed, err := switchNode(ctx, env, ss, n, addrs)
				if err != nil {
					return engine.Result{}, err
				}
				if changed {
					switched = append(switched, n)
				}
			}
			cm, diff, err := kubeletConfigMapEdit(ctx, env, ss, true, addrs)
			if err != nil {
				return engine.Result{}, err
			}
			summary := []string{}
			if res.Changed {
				summary = append(summary, res.Summary)
				res.Diffs = append(res.Diffs, "")
			}
			if tookOver != "" {
				summary = append(summary, tookOver)
			}
			if len(switched) > 0 {
				summary = append(summary, fmt.Sprintf("switched the kubelet clusterDNS of %s to %s", strings.Join(switched, ", "), addrList(addrs)))
			}
			if cm != "" {
				summary = append(summary, cm)
				res.Diffs = append(res.Diffs, diff)
			}
			res.Diffs = slices.DeleteFunc(res.Diffs, func(d string) bool { return d == "" })
			res.Changed = len(summary) > 0
			if !res.Changed {
				summary = append(summary, "already applied")
			}
			if len(notReady) > 0 {
				summary = append(summary, fmt.Sprintf("NotReady, not switched (run install again when they are back): %s", strings.Join(notReady, ", ")))
			}
			res.Summary = strings.Join(summary, "; ")
			return res, nil
		},
		Revert: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			var summary []string
			cm, _, err := kubeletConfigMapEdit(ctx, env, ss, false, nil)
			if err != nil {
				return engine.Result{}, err
			}
			if cm != "" {
				summary = append(summary, cm)
			}
			restored, err := restoreNodes(ctx, env, ss)
			if err != nil {
				return engine.Result{}, err
			}
			if len(restored) > 0 {
				summary = append(summary, "restored the kubelet clusterDNS of "+strings.Join(restored, ", "))
			}
			// Pods made while their node was switched keep the address in
			// their resolv.conf: a forwarder stays there for them.
			windows := kubeletWindows(ss)
			stranded, err := strandedPods(ctx, env, windows)
			if err != nil {
				return engine.Result{}, err
			}
			if len(stranded) > 0 {
				handed, err := handOverToLeftover(ctx, env, ss, stranded, windows)
				if err != nil {
					return engine.Result{}, err
				}
				summary = append(summary, handed)
			}
			cachePods, err := recordCacheNodes(ctx, env, ss)
			if err != nil {
				return engine.Result{}, err
			}
			res, err := files.Revert(ctx, env, ss)
			if err != nil {
				return engine.Result{}, err
			}
			if res.Changed {
				summary = append(summary, res.Summary)
			}
			if !env.Options.DryRun {
				if err := kubewait.For(ctx, env.Options.Timeout, "node-local cache pods not gone", kube.PodsGone(env, cachePods)); err != nil {
					return engine.Result{}, err
				}
			}
			torn, tornAddrs, err := teardownNodes(ctx, env, ss, stranded)
			if err != nil {
				return engine.Result{}, err
			}
			if len(torn) > 0 {
				summary = append(summary, fmt.Sprintf("took %s off lo of %s", addrList(tornAddrs), strings.Join(torn, ", ")))
			}
			if len(summary) == 0 {
				return engine.Result{Summary: "nothing to revert"}, nil
			}
			return engine.Result{Changed: true, Summary: strings.Join(summary, "; ")}, nil
		},
		Status: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
			lingers, err := leftoverStatus(ctx, env)
			if err != nil {
				return "", "", err
			}
			st, filesDetail, err := files.Status(ctx, env, ss)
			if err != nil || st == engine.NotApplied {
				return st, lingers, err
			}
			addrs, err := setupAddresses(ctx, env, nodeLocalDNS)
			if err != nil {
				return "", "", err
			}
			detail, all, err := nodeLocalStatus(ctx, env, ss, addrs)
			if err != nil {
				return "", "", err
			}
			if st == engine.Applied && !all && ss.Applied {
				st = engine.Drifted
			}
			details := slices.DeleteFunc([]string{filesDetail, detail, lingers}, func(d string) bool { return d == "" })
			return st, strings.Join(details, "; "), nil
		},
	}
}

// nodeLocalYurthubOption makes each cache's yurthosts read through yurthub
// with the node's identity where the node runs yurthub (the caches are on
// the host network), instead of the ServiceAccount token that yurthub makes
// up for a pod started while cut off (see plugin/yurthosts). Its proxy at
// the dummy interface's address: yurtadm's yurthub serves it there besides
// 127.0.0.1, and one started with --bind-proxy-address=169.254.2.1 there
// alone.
const nodeLocalYurthubOption = "yurthub http://169.254.2.1:10261"

// nodeLocalObjects are deploy/node-local-dns with install's images, the
// profile's ServiceAccount (the DaemonSet's, and the subject of the
// kubernetes plugin's grant), the profile's yurthosts options and its
// records ConfigMap and Service in the nodes' grant (deploy/records lets
// them read the shards), and the kubernetes directive of the cluster's CoreDNS: each cache answers the
// cluster's zones itself, from the Services it watches (through yurthub on
// an edge node), so an edge node that restarts cut off from the cloud
// still has them when its cache's memory is gone and kube-dns's endpoints
// are stale.
func nodeLocalObjects(ctx context.Context, env *engine.Env, l layout.Layout) ([]*unstructured.Unstructured, error) {
	objs, err := deploy.Render(deploy.NodeLocalDNS)
	if err != nil {
		return nil, err
	}
	stock := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, kube.Key(tunnelnodes.CoreDNSName), stock); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading ConfigMap %s: %w", tunnelnodes.CoreDNSName, err)
	}
	sync, err := kube.SyncImage(env)
	if err != nil {
		return nil, err
	}
	addrs, err := nodeLocalAddrs(ctx, env)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			src, _, _ := unstructured.NestedString(o.Object, "data", "Corefile")
			edited, err := corefile.SetYurthosts(corefileAddresses(src, addrs), append(slices.Clone(l.YurthostsOptions), nodeLocalYurthubOption))
			if err != nil {
				return nil, fmt.Errorf("deploy/%s Corefile: %w", deploy.NodeLocalDNS, err)
			}
			if cluster, ok := stock.Data[kube.CorefileKey]; ok {
				if edited, err = corefile.SetKubernetes(edited, cluster); err != nil {
					return nil, fmt.Errorf("the kubernetes directive of ConfigMap %s: %w", tunnelnodes.CoreDNSName, err)
				}
			}
			if err := unstructured.SetNestedField(o.Object, edited, "data", "Corefile"); err != nil {
				return nil, err
			}
		case "Role":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				rule := r.(map[string]any)
				names := map[string]string{"configmaps": l.RecordsConfigMap, "services": l.Service}
				rule["resourceNames"] = []any{names[rule["resources"].([]any)[0].(string)]}
			}
			if err := unstructured.SetNestedSlice(o.Object, rules, "rules"); err != nil {
				return nil, err
			}
		case "ClusterRoleBinding":
			subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
			for _, sub := range subjects {
				sub.(map[string]any)["name"] = l.DNSServiceAccount
			}
			if err := unstructured.SetNestedSlice(o.Object, subjects, "subjects"); err != nil {
				return nil, err
			}
		case "DaemonSet":
			spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			spec["serviceAccountName"] = l.DNSServiceAccount
			daemonSetAddresses(spec, addrs)
			for field, image := range map[string]string{"initContainers": sync, "containers": env.Options.CoreDNSImage} {
				containers, _ := spec[field].([]any)
				for _, c := range containers {
					if image != "" {
						c.(map[string]any)["image"] = image
					}
				}
			}
			if err := unstructured.SetNestedMap(o.Object, spec, "spec", "template", "spec"); err != nil {
				return nil, err
			}
		}
	}
	return objs, rollOnCorefile(objs)
}

// corefileHashAnnotation on the caches' pod template is their Corefile's
// SHA-256: a Corefile of another version's rolls them, so that install
// knows each cache runs it once the rollout is done, instead of waiting
// for the kubelet's ConfigMap sync and reload's poll on every node.
const corefileHashAnnotation = "yurtdns.io/corefile-sha256"

// rollOnCorefile sets corefileHashAnnotation on the DaemonSet of objs from
// the ConfigMap's Corefile.
func rollOnCorefile(objs []*unstructured.Unstructured) error {
	var corefile string
	var ds *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			corefile, _, _ = unstructured.NestedString(o.Object, "data", "Corefile")
		case "DaemonSet":
			ds = o
		}
	}
	if ds == nil || corefile == "" {
		return fmt.Errorf("deploy/%s has no DaemonSet or no Corefile", deploy.NodeLocalDNS)
	}
	sum := sha256.Sum256([]byte(corefile))
	return unstructured.SetNestedField(ds.Object, hex.EncodeToString(sum[:]), "spec", "template", "metadata", "annotations", corefileHashAnnotation)
}

// readyNodes are kube.ReadyNodes sorted by name.
func readyNodes(ctx context.Context, env *engine.Env) (ready []corev1.Node, notReady []string, err error) {
	ready, notReady, err = kube.ReadyNodes(ctx, env)
	slices.SortFunc(ready, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return ready, notReady, err
}

// readyNodeNames are readyNodes' names.
func readyNodeNames(ctx context.Context, env *engine.Env) (ready, notReady []string, err error) {
	nodes, notReady, err := readyNodes(ctx, env)
	for _, n := range nodes {
		ready = append(ready, n.Name)
	}
	return ready, notReady, err
}

// switchNode points node's kubelet at the node-local cache once the
// node's cache pod is Ready. Its Job checks the cache answers there and
// waits for the restarted kubelet's healthz: the kubelet reads its file
// only at start, so a healthy new kubelet runs the new clusterDNS (status
// reads it back from the kubelet's /configz).
func switchNode(ctx context.Context, env *engine.Env, ss *engine.StepState, node string, addrs []netip.Addr) (bool, error) {
	rec := ss.Records[kubeletRecordKey(node)].Kubelet
	if rec != nil && rec.Since != nil && rec.Until == nil {
		dns, err := runningClusterDNS(ctx, env, node)
		if err == nil && slices.Equal(dns, nodelocal.Strings(addrs)) {
			return false, nil
		}
		// A node the apiserver will not proxy to by name, switched by an
		// install that finished: its Job saw the restarted kubelet healthy.
		var refused *kube.NodeNameNotProxyableError
		if errors.As(err, &refused) && ss.Applied && switchedTo(rec, addrs) {
			return false, nil
		}
	}
	if env.Options.DryRun {
		return true, nil
	}
	if err := kubewait.For(ctx, env.Options.Timeout, "node-local cache on node "+node+" not Ready", podReadyOn(env, nodeLocalPodLabelV, node)); err != nil {
		return false, err
	}
	image, err := kube.SyncImage(env)
	if err != nil {
		return false, err
	}
	// Recorded before the Job exists: a revert after an interruption here
	// knows the kubelet may have been switched, with what image, and that
	// pods created from now on may resolve at the node-local address.
	ss.Records[kubeletRecordKey(node)] = engine.Record{Kubelet: switchRecord(rec, node, image, addrs, time.Now())}
	if err := ss.Persist(ctx); err != nil {
		return false, err
	}
	if err := runKubeletJob(ctx, env, ss, node, switchKubelet, image, addrs); err != nil {
		return false, err
	}
	return true, nil
}

// switchRecord is the record of node's kubelet switched to addrs at now.
// A kubelet switched already (to the IPv4 address alone, by an earlier
// version) keeps its Since: the pods made since resolve at the node-local
// address too, and revert must hand them to the leftover forwarder.
func switchRecord(prev *engine.KubeletRecord, node, image string, addrs []netip.Addr, now time.Time) *engine.KubeletRecord {
	since := &metav1.Time{Time: now}
	if prev != nil && prev.Since != nil && prev.Until == nil {
		since = prev.Since
	}
	return &engine.KubeletRecord{Node: node, Image: image, Addresses: recordAddresses(addrs), Since: since}
}

// restoreNodes puts every switched kubelet back, one node after another. A
// node that is not Ready cannot run its Job: revert stops there, the cache
// still serving it, until the node is back.
func restoreNodes(ctx context.Context, env *engine.Env, ss *engine.StepState) ([]string, error) {
	var nodes []string
	for _, r := range ss.Records {
		if r.Kubelet != nil && r.Kubelet.Since != nil && r.Kubelet.Until == nil {
			nodes = append(nodes, r.Kubelet.Node)
		}
	}
	slices.Sort(nodes)
	if env.Options.DryRun {
		return nodes, nil
	}
	for _, n := range nodes {
		rec := ss.Records[kubeletRecordKey(n)].Kubelet
		node := &corev1.Node{}
		err := env.Client.Get(ctx, client.ObjectKey{Name: n}, node)
		if apierrors.IsNotFound(err) {
			rec.Until = &metav1.Time{Time: time.Now()}
			continue
		}
		if err != nil {
			return nil, err
		}
		if !kube.NodeReady(node) {
			return nil, fmt.Errorf("node %s is NotReady: its kubelet still gives pods %s, so its cache stays; run revert again when the node is back", n, addrList(recordedAddresses(rec)))
		}
		if err := waitSwitchJobGone(ctx, env, ss, n, rec); err != nil {
			return nil, err
		}
		if err := runKubeletJob(ctx, env, ss, n, restoreKubelet, rec.JobImage(env.Options), recordedAddresses(rec)); err != nil {
			return nil, err
		}
		rec.Until = &metav1.Time{Time: time.Now()}
		if err := ss.Persist(ctx); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// recordCacheNodes records, before the DaemonSet goes, every node one of
// its pods started on (their init containers put the addresses there),
// switched or not, and returns the pods. A node recorded with fewer
// addresses (switched by an earlier version, or NotReady while install
// rolled the caches to both families) gets the DaemonSet's as well, so
// teardown takes every address its pods may have set up.
func recordCacheNodes(ctx context.Context, env *engine.Env, ss *engine.StepState) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace), client.MatchingLabels{nodeLocalPodLabel: nodeLocalPodLabelV}); err != nil {
		return nil, err
	}
	if env.Options.DryRun || len(pods.Items) == 0 {
		return pods.Items, nil
	}
	image, err := kube.SyncImage(env)
	if err != nil {
		return nil, err
	}
	addrs, err := setupAddresses(ctx, env, nodeLocalDNS)
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if !setupStarted(&p) {
			continue
		}
		k := kubeletRecordKey(p.Spec.NodeName)
		if rec := ss.Records[k].Kubelet; rec != nil {
			rec.Addresses = recordAddresses(unionAddresses(recordedAddresses(rec), addrs))
		} else {
			ss.Records[k] = engine.Record{Kubelet: &engine.KubeletRecord{Node: p.Spec.NodeName, Image: image, Addresses: recordAddresses(addrs)}}
		}
	}
	return pods.Items, ss.Persist(ctx)
}

// setupStarted: a kubelet started the pod's setup init container, which may
// have put the address on its node. A pod bound to a node whose kubelet
// never ran it (an edge node offline since) left nothing to tear down.
func setupStarted(p *corev1.Pod) bool {
	for _, c := range p.Status.InitContainerStatuses {
		if c.State.Running != nil || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil {
			return p.Spec.NodeName != ""
		}
	}
	return false
}

// teardownNodes undoes the caches' setup on every recorded node once the
// caches are gone (the address off lo, the NOTRACK table dropped) and then
// forgets the node. A NotReady node keeps both, and its record, until a
// later revert: it cannot run the Job now. The leftover's nodes (keys of
// lingering) are only forgotten: their leftover tears them down.
func teardownNodes(ctx context.Context, env *engine.Env, ss *engine.StepState, lingering map[string][]string) (torn []string, tornAddrs []netip.Addr, err error) {
	var nodes []string
	for _, r := range ss.Records {
		k := r.Kubelet
		if k == nil {
			continue
		}
		if _, ok := lingering[k.Node]; !ok {
			nodes = append(nodes, k.Node)
		} else if !env.Options.DryRun {
			delete(ss.Records, kubeletRecordKey(k.Node))
		}
	}
	slices.Sort(nodes)
	if env.Options.DryRun {
		for _, n := range nodes {
			tornAddrs = unionAddresses(tornAddrs, recordedAddresses(ss.Records[kubeletRecordKey(n)].Kubelet))
		}
		return nodes, tornAddrs, nil
	}
	var notReady []string
	var notReadyAddrs []netip.Addr
	for _, n := range nodes {
		rec := ss.Records[kubeletRecordKey(n)].Kubelet
		node := &corev1.Node{}
		err := env.Client.Get(ctx, client.ObjectKey{Name: n}, node)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, nil, err
		case !kube.NodeReady(node):
			notReady = append(notReady, n)
			notReadyAddrs = unionAddresses(notReadyAddrs, recordedAddresses(rec))
			continue
		default:
			addrs := recordedAddresses(rec)
			if err := runKubeletJob(ctx, env, ss, n, teardownNode, rec.JobImage(env.Options), addrs); err != nil {
				return nil, nil, err
			}
			torn = append(torn, n)
			tornAddrs = unionAddresses(tornAddrs, addrs)
		}
		delete(ss.Records, kubeletRecordKey(n))
		if err := ss.Persist(ctx); err != nil {
			return nil, nil, err
		}
	}
	if len(notReady) > 0 {
		return nil, nil, fmt.Errorf("nodes %s are NotReady: %s stays on their lo (nothing answers there now); run revert again when they are back",
			strings.Join(notReady, ", "), addrList(notReadyAddrs))
	}
	return torn, tornAddrs, nil
}

// revertRestartsIt: revert itself, later in the same run, takes care of the
// pod. kube-apiserver's static pod, which a kubeadm upgrade under node-local
// DNS makes anew, resolves cluster names only for the control-plane step
// (node names), whose revert gives it its original dnsPolicy and so a new
// resolv.conf (an operator cannot restart a static pod by deleting it). The
// sync's pods, rolled by an upgrade of yurtdns under node-local DNS, are
// deleted by the sync step's revert, and reach the apiserver by the
// kubernetes Service's IP, not by a name. The leftover's linger needs no
// such exception: it only waits for them, and revert makes them anew.
func revertRestartsIt(p *corev1.Pod) bool {
	_, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]
	return mirror && p.Labels["component"] == "kube-apiserver" || ofSyncDeployment(p)
}

// podReadyOn: the pod of DaemonSet app (the node-local cache, or the
// leftover) on node is Ready.
func podReadyOn(env *engine.Env, app, node string) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace), client.MatchingLabels{nodeLocalPodLabel: app}); err != nil {
			return false, "", err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
				if kubewait.PodReady(&p) {
					return true, "", nil
				}
				return false, "pod " + p.Name + " " + strings.TrimSpace(string(p.Status.Phase)+" "+kube.PodFailure(&p)), nil
			}
		}
		return false, "no pod yet", nil
	}
}

// kubeletConfigMapEdit sets (install) or restores (revert) clusterDNS in
// kubeadm's kubelet-config ConfigMap, which joining nodes' kubelets start
// from; a cluster without it (not made by kubeadm) has nothing to edit.
// It returns a summary ("" for no change) and, in a dry run, the diff.
func kubeletConfigMapEdit(ctx context.Context, env *engine.Env, ss *engine.StepState, install bool, addrs []netip.Addr) (string, string, error) {
	edit := kube.ConfigMapKeyEdit(kubeletConfigMap, kubeletConfigKey, func(_ *engine.Env, current string, _ bool) (string, error) {
		next, _, err := nodelocal.SetClusterDNS([]byte(current), nodelocal.Strings(addrs))
		return string(next), err
	})
	edit.Undo = kubeletConfigUndo
	if !install {
		outcome, diff, err := edit.Revert(ctx, env, ss)
		switch {
		case err != nil:
			return "", "", err
		case outcome == kube.ChangedSince:
			return edit.LeftAsIs(), "", nil
		case outcome == kube.Restored:
			return "restored " + edit.Key, diff, nil
		}
		return "", "", nil
	}
	if err := env.Client.Get(ctx, kube.Key(kubeletConfigMap), &corev1.ConfigMap{}); apierrors.IsNotFound(err) {
		return "", "", nil
	}
	changed, diff, err := edit.Install(ctx, env, ss)
	if err != nil || !changed {
		return "", "", err
	}
	return edit.Key + " clusterDNS " + addrList(addrs), diff, nil
}

// kubeletConfigUndo: kubeadm upgrade keeps clusterDNS in kubelet-config but
// writes the rest anew, so revert puts the original clusterDNS back into the
// text as it is now.
func kubeletConfigUndo(_ *engine.Env, current string, rec engine.Record) (string, error) {
	// What install wrote: the node-local addresses of its run (an
	// earlier install's record may have no After: the IPv4 address).
	wrote := []string{nodelocal.Address.String()}
	if after, err := nodelocal.ParseKubeletConfig([]byte(rec.After)); rec.After != "" && err == nil && len(after.ClusterDNS) > 0 {
		wrote = after.ClusterDNS
	}
	now, err := nodelocal.ParseKubeletConfig([]byte(current))
	if err != nil || !slices.Equal(now.ClusterDNS, wrote) {
		return current, err
	}
	was, err := nodelocal.ParseKubeletConfig([]byte(rec.Before))
	if err != nil {
		return current, fmt.Errorf("the recorded kubelet configuration: %w", err)
	}
	next, _, err := nodelocal.SetClusterDNS([]byte(current), was.ClusterDNS)
	return string(next), err
}

// nodeLocalStatus says, per node, what its kubelet runs with and whether
// its cache is Ready; all is true when every Ready node is switched. A
// node whose /configz the apiserver will not proxy to (its name resolves
// to a loopback address where the apiserver runs) counts as switched when
// install switched it: its switch Job saw the restarted kubelet healthy,
// and the line says why it could not be read back.
func nodeLocalStatus(ctx context.Context, env *engine.Env, ss *engine.StepState, addrs []netip.Addr) (detail string, all bool, err error) {
	nodes, notReady, err := readyNodes(ctx, env)
	if err != nil {
		return "", false, err
	}
	all = true
	var lines []string
	for _, node := range nodes {
		n := node.Name
		cache, why, err := podReadyOn(env, nodeLocalPodLabelV, n)(ctx)
		if err != nil {
			return "", false, err
		}
		state := "cache Ready"
		if !cache {
			state = "cache not Ready (" + why + ")"
		}
		k, err := readRunningKubelet(ctx, env, n)
		var refused *kube.NodeNameNotProxyableError
		line := ""
		switch {
		case errors.As(err, &refused) && switchedTo(ss.Records[kubeletRecordKey(n)].Kubelet, addrs):
			line = fmt.Sprintf("%s: %s; kubelet switched to %s by install, not read back: %v", n, state, addrList(addrs), err)
		case err != nil:
			all = false
			line = fmt.Sprintf("%s: %s; kubelet configuration unreadable: %v", n, state, err)
		case slices.Equal(k.ClusterDNS, nodelocal.Strings(addrs)):
			line = fmt.Sprintf("%s: %s; kubelet clusterDNS %s", n, state, strings.Join(k.ClusterDNS, ","))
		default:
			all = false
			line = fmt.Sprintf("%s: %s; kubelet clusterDNS %s (not switched)", n, state, strings.Join(k.ClusterDNS, ","))
		}
		if err == nil && watchListsBehindYurthub(&node, k.FeatureGates) {
			line += fmt.Sprintf(" (warning: kubelet %s starts its informers with a watch-list, which yurthub answers from its cache with nothing: "+
				"restarted while cut off from the cloud it would run no pod; set featureGates WatchListClient: false in its configuration)", node.Status.NodeInfo.KubeletVersion)
		}
		lines = append(lines, line)
	}
	for _, n := range notReady {
		lines = append(lines, n+": NotReady")
	}
	return strings.Join(lines, "; "), all, nil
}

// switchedTo: install switched the node's kubelet to addrs and has not
// restored it since.
func switchedTo(rec *engine.KubeletRecord, addrs []netip.Addr) bool {
	return rec != nil && rec.Since != nil && rec.Until == nil && slices.Equal(recordedAddresses(rec), addrs)
}

// watchListFrom is the first kubelet whose client-go starts every informer
// with a watch-list (WatchListClient on by default).
var watchListFrom = utilversion.MustParseGeneric("1.35.0")

// watchListsBehindYurthub: an edge node's kubelet (behind yurthub) that
// watch-lists. yurthub v1.7, serving from its cache while the cloud is
// away, answers a watch-list with 200 and no objects, so such a kubelet
// restarted while cut off never learns its own Node and starts no pod
// (seen on the real cluster: 120 s of a reboot, not one pod).
func watchListsBehindYurthub(n *corev1.Node, gates map[string]bool) bool {
	if n.Labels[tunnelnodes.EdgeNodeLabel] != "true" {
		return false
	}
	v, err := utilversion.ParseGeneric(n.Status.NodeInfo.KubeletVersion)
	if err != nil || v.LessThan(watchListFrom) {
		return false
	}
	on, set := gates["WatchListClient"]
	return !set || on
}
