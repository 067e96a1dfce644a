package preflight

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// profileFits runs the layout's own pre-flight (what install refuses, and
// its hint at another layout).
func profileFits(ctx context.Context, c *cluster) (Result, error) {
	r := Result{Name: "profile"}
	var hint bytes.Buffer
	err := c.layout.Preflight(func(obj client.Object, name string) (bool, error) { return c.get(ctx, obj, name) }, &hint)
	switch {
	case err != nil:
		r.Outcome, r.Found = Fail, err.Error()
		r.Action = "lay the cluster out as that says, or give the --profile of its layout"
	case hint.Len() > 0:
		r.Outcome, r.Found = Warn, strings.TrimSpace(strings.TrimPrefix(hint.String(), "hint: "))
		r.Action = "give the --profile the cluster's layout"
	default:
		r.Outcome, r.Found = Pass, "the cluster has the objects of --profile "+c.layout.Name
	}
	return r, nil
}

// containerRuntime: containerd is the runtime yurtdns is tested on, and
// the one its images are imported into without a registry. Another runtime
// is untested, not known to fail.
func containerRuntime(_ context.Context, c *cluster) (Result, error) {
	r := Result{Name: "container-runtime"}
	var other []string
	for _, n := range c.nodes {
		if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			other = append(other, n.Name)
		}
	}
	if len(other) == 0 {
		r.Outcome, r.Found = Pass, fmt.Sprintf("containerd on every node (%d)", len(c.nodes))
		return r, nil
	}
	var found []string
	for _, name := range other[:min(len(other), shownNodes)] {
		i := slices.IndexFunc(c.nodes, func(n corev1.Node) bool { return n.Name == name })
		found = append(found, fmt.Sprintf("%s runs %q", name, c.nodes[i].Status.NodeInfo.ContainerRuntimeVersion))
	}
	if len(other) > shownNodes {
		found = append(found, fmt.Sprintf("and %d more", len(other)-shownNodes))
	}
	r.Outcome, r.Nodes = Warn, other
	r.Found = "not containerd: " + strings.Join(found, ", ")
	r.Action = "yurtdns is tested on containerd only; there, load its images with your runtime's tools or from a registry"
	return r, nil
}

// openYurt reads OpenYurt's version where the control-plane step reads it;
// withNodeLifecycle says what it means for kube-controller-manager (the
// layouts whose steps touch the control plane).
func openYurt(withNodeLifecycle bool) check {
	return func(ctx context.Context, c *cluster) (Result, error) {
		r := Result{Name: "openyurt"}
		v, from, err := steps.OpenYurtVersion(ctx, c.env)
		if err != nil {
			return r, err
		}
		if v == nil {
			r.Outcome, r.Found = Warn, "no OpenYurt version: no Deployment kube-system/yurt-manager, or neither its label app.kubernetes.io/version nor its image tag is a version"
			r.Action = "install OpenYurt's yurt-manager (yurtdns is tested with v1.7.0)"
		} else {
			r.Outcome, r.Found = Pass, fmt.Sprintf("OpenYurt v%s (%s)", v, from)
		}
		if !withNodeLifecycle {
			return r, nil
		}
		keep, _, err := steps.KeepNodeLifecycle(ctx, c.env)
		if err != nil {
			return r, err
		}
		off := "; install turns kube-controller-manager's node lifecycle controller off (--controllers=...,-nodelifecycle)"
		switch {
		case keep && c.env.Options.NodeLifecycle == engine.NodeLifecycleKeep:
			r.Found += "; install leaves kube-controller-manager alone: --kcm-nodelifecycle " + engine.NodeLifecycleKeep
		case keep:
			r.Found += "; install leaves kube-controller-manager's node lifecycle controller on: since v1.6 yurt-manager keeps the pods of autonomous nodes itself"
		case c.env.Options.NodeLifecycle == engine.NodeLifecycleDisable:
			r.Found += off + ": --kcm-nodelifecycle " + engine.NodeLifecycleDisable
		case v != nil:
			// Before v1.6 the controller would evict the pods of an edge
			// node cut off from the cloud.
			r.Found += off + ", as OpenYurt before v1.6 needs"
		default:
			r.Found += off + ", not knowing OpenYurt's version"
			r.Action += "; or --kcm-nodelifecycle keep to leave kube-controller-manager alone"
		}
		return r, nil
	}
}

// yurthub: every edge node runs yurthub (its mirror pod, or a NodePool's
// systemd service), as the kube-proxy step reads it. Behind it the edge
// pods, coredns-yurt among them, keep their API objects while cut off.
func yurthub(_ context.Context, c *cluster) (Result, error) {
	r := Result{Name: "yurthub"}
	edge := 0
	for _, n := range c.nodes {
		if n.Labels[tunnelnodes.EdgeNodeLabel] != "true" {
			continue
		}
		edge++
		if !steps.RunsYurthub(&n, c.pods) {
			r.Nodes = append(r.Nodes, n.Name)
		}
	}
	switch {
	case edge == 0:
		r.Outcome, r.Found = Warn, "no edge node (label "+tunnelnodes.EdgeNodeLabel+"=true)"
		r.Action = "join the edge nodes with yurtadm join, which labels them"
	case len(r.Nodes) > 0:
		r.Outcome, r.Found = Fail, fmt.Sprintf("no yurthub on edge node(s) %s (no mirror pod kube-system/yurt-hub-<node>, not in a NodePool)", nodeNames(r.Nodes))
		r.Action = "run yurthub there (yurtadm join, or yurthub's static pod): without it the node's pods lose the apiserver when the node is cut off"
	default:
		r.Outcome, r.Found = Pass, fmt.Sprintf("yurthub on every edge node (%d)", edge)
	}
	return r, nil
}

// tunnelService: the layout's tunnel Service has a ClusterIP and the
// layout's rules map node names to it (Raven's only while its L7 proxy is
// on).
func tunnelService(ctx context.Context, c *cluster) (Result, error) {
	l := c.layout
	r := Result{Name: "tunnel-service"}
	svc := &corev1.Service{}
	exists, err := c.get(ctx, svc, l.Service)
	if err != nil {
		return r, err
	}
	ip := tunnelnodes.TunnelClusterIP(svc)
	if !exists || !ip.IsValid() {
		r.Outcome, r.Found = Fail, "no Service kube-system/"+l.Service+" with a ClusterIP"
		r.Action = "set up " + l.Help + " first: its Service's ClusterIP is what the edge node names resolve to"
		return r, nil
	}
	var config map[string]string
	if l.Config != "" {
		cm := &corev1.ConfigMap{}
		if _, err := c.get(ctx, cm, l.Config); err != nil {
			return r, err
		}
		config = cm.Data
	}
	// Each family's: yurthosts answers a tunneled name with all of them.
	ips := tunnelnodes.FormatClusterIPs(tunnelnodes.ServiceClusterIPs(svc))
	if _, toTunnel := l.Rules(config, ip); !toTunnel {
		r.Outcome, r.Found = Warn, fmt.Sprintf("Service kube-system/%s (%s), but ConfigMap kube-system/%s maps no node name to it: every node name resolves to the node's own address", l.Service, ips, l.Config)
		r.Action = fmt.Sprintf("to reach the edge kubelets through the proxy, set %s: \"true\" in ConfigMap kube-system/%s", tunnelnodes.RavenEnableProxyKey, l.Config)
		return r, nil
	}
	r.Outcome, r.Found = Pass, fmt.Sprintf("Service kube-system/%s, ClusterIP %s", l.Service, ips)
	return r, nil
}

// recreatePatch is the action for a tunnel server that rolls: Recreate
// takes no rollingUpdate, so that goes too.
const recreatePatch = `kubectl -n kube-system patch deployment ` + steps.YurtTunnelServer +
	` --type=merge -p '{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}'`

// tunnelServerStrategy: the tunnel-dns step rolls yurt-tunnel-server out.
// Its chart's single hostNetwork replica cannot start beside itself on a
// single cloud node, so under RollingUpdate install waits out --timeout and
// stops there.
func tunnelServerStrategy(ctx context.Context, c *cluster) (Result, error) {
	r := Result{Name: "tunnel-server-strategy"}
	d := &appsv1.Deployment{}
	exists, err := c.get(ctx, d, steps.YurtTunnelServer)
	switch {
	case err != nil:
		return r, err
	case !exists:
		r.Outcome, r.Found = Warn, "no Deployment kube-system/"+steps.YurtTunnelServer+": install skips tunnel-dns"
		r.Action = "install yurt-tunnel-server first if the cluster is to use yurt-tunnel"
	case d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType:
		r.Outcome, r.Found = Pass, "Deployment kube-system/"+steps.YurtTunnelServer+" has strategy Recreate"
	default:
		strategy := string(d.Spec.Strategy.Type)
		if strategy == "" {
			strategy = string(appsv1.RollingUpdateDeploymentStrategyType)
		}
		r.Outcome = Fail
		r.Found = "Deployment kube-system/" + steps.YurtTunnelServer + " has strategy " + strategy + ": its hostNetwork pod cannot start beside the old one, and install stops at tunnel-dns"
		r.Action = recreatePatch + " (or install --skip tunnel-dns)"
	}
	return r, nil
}

// edgeKubeletWatchList: an edge kubelet 1.35 or later watch-lists, which
// yurthub answers from its cache with nothing, unless its WatchListClient
// gate is off. Its gates are only readable through the node proxy, so the
// check warns by version.
func edgeKubeletWatchList(_ context.Context, c *cluster) (Result, error) {
	r := Result{Name: "edge-kubelet-watch-list"}
	var versions []string
	for _, n := range c.nodes {
		if steps.MayWatchListBehindYurthub(&n) {
			r.Nodes = append(r.Nodes, n.Name)
			if len(versions) < shownNodes {
				versions = append(versions, n.Name+" "+n.Status.NodeInfo.KubeletVersion)
			}
		}
	}
	if len(r.Nodes) == 0 {
		r.Outcome, r.Found = Pass, "no edge kubelet "+steps.WatchListFrom()+" or later"
		return r, nil
	}
	if len(r.Nodes) > shownNodes {
		versions = append(versions, fmt.Sprintf("and %d more", len(r.Nodes)-shownNodes))
	}
	r.Outcome = Warn
	r.Found = "edge kubelet(s) " + steps.WatchListFrom() + " or later: " + strings.Join(versions, ", ") +
		"; restarted while cut off, such a kubelet runs no pod unless its WatchListClient gate is off (not readable from the API)"
	r.Action = "set featureGates: {WatchListClient: false} in each one's kubelet configuration, unless set"
	return r, nil
}

// maxStatusImages is the kubelet's default --node-status-max-images: a
// node lists only its largest images, so a small one may be there unlisted.
const maxStatusImages = 50

// images: the images install runs are on every node (a node-local cache
// or a handover pod may land on any), as the kubelet lists them.
func images(_ context.Context, c *cluster) (Result, error) {
	r := Result{Name: "images"}
	o := c.env.Options
	want := []string{o.CoreDNSImage, o.SyncImage}
	refs := make([]name.Reference, len(want))
	for i, img := range want {
		ref, err := name.ParseReference(img)
		if err != nil {
			return r, fmt.Errorf("image %q: %w", img, err)
		}
		refs[i] = ref
	}
	missing := map[string][]string{} // image → nodes
	var unlisted []string            // nodes whose list may be cut short
	for _, n := range c.nodes {
		lacks := false
		for i, ref := range refs {
			if !listsImage(&n, ref) {
				missing[want[i]] = append(missing[want[i]], n.Name)
				lacks = true
			}
		}
		if lacks {
			r.Nodes = append(r.Nodes, n.Name)
			if len(n.Status.Images) >= maxStatusImages {
				unlisted = append(unlisted, n.Name)
			}
		}
	}
	if len(r.Nodes) == 0 {
		r.Outcome, r.Found = Pass, fmt.Sprintf("%s on every node (%d)", strings.Join(want, " and "), len(c.nodes))
		return r, nil
	}
	var found, imports []string
	for _, img := range want {
		if nodes := missing[img]; len(nodes) > 0 {
			found = append(found, img+" missing on "+nodeNames(nodes))
			imports = append(imports, "ctr -n k8s.io images import --all-platforms "+archive(img))
		}
	}
	r.Outcome, r.Found = Fail, strings.Join(found, "; ")
	r.Action = "on each such node: " + strings.Join(imports, " and ") + " (or give --coredns-image/--sync-image an image every node pulls)"
	if len(unlisted) == len(r.Nodes) {
		// Every node that seems to lack an image lists as many as the kubelet
		// shows by default: it may be there, unlisted.
		r.Outcome = Warn
		r.Found += fmt.Sprintf(" (%s list %d or more images: the kubelet shows only the largest %d by default)", nodeNames(unlisted), maxStatusImages, maxStatusImages)
		r.Action = "check with crictl images on each such node; if missing, " + r.Action
	}
	return r, nil
}

// listsImage: one of the node's image names is ref, normalized as the
// kubelet's runtime names it (docker.io/ for a short name).
func listsImage(n *corev1.Node, ref name.Reference) bool {
	for _, img := range n.Status.Images {
		for _, s := range img.Names {
			if have, err := name.ParseReference(s); err == nil && have.Name() == ref.Name() {
				return true
			}
		}
	}
	return false
}

// archive is the OCI archive `make image` and a release write for img.
func archive(img string) string {
	repo, _, _ := strings.Cut(img, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return path.Base(repo) + ".oci.tar"
}

// kubeadmDNS: the objects of kubeadm's CoreDNS that the corefile,
// coredns-daemonset and kube-dns-topology steps work from.
func kubeadmDNS(ctx context.Context, c *cluster) (Result, error) {
	r := Result{Name: "kubeadm-dns"}
	var missing []string
	for _, o := range []struct {
		obj  client.Object
		kind string
		name string
	}{
		{&corev1.Service{}, "Service", kube.KubeDNSService},
		{&appsv1.Deployment{}, "Deployment", tunnelnodes.CoreDNSName},
		{&corev1.ConfigMap{}, "ConfigMap", tunnelnodes.CoreDNSName},
	} {
		exists, err := c.get(ctx, o.obj, o.name)
		if err != nil {
			return r, err
		}
		if !exists {
			missing = append(missing, o.kind+" kube-system/"+o.name)
		}
	}
	if len(missing) > 0 {
		r.Outcome, r.Found = Fail, "no "+strings.Join(missing, ", no ")
		r.Action = "yurtdns works from kubeadm's CoreDNS layout (Service kube-dns, Deployment and ConfigMap coredns); a cluster without it is not supported"
		return r, nil
	}
	r.Outcome, r.Found = Pass, "Service kube-system/"+kube.KubeDNSService+", Deployment and ConfigMap kube-system/"+tunnelnodes.CoreDNSName
	return r, nil
}
