package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const ravenFixtures = "../testdata/raven"

// ravenCluster is a harness control plane shaped like a Raven L7 cluster:
// upstream's raven-proxy-dns.yaml as applied, yurt-manager with its
// --controllers flag, raven-cfg with the proxy on, the proxy Service with
// Raven's ports, a Ready cloud node (raven-proxy-dns runs on
// openyurt.io/is-edge-worker=false nodes) and an edge node.
func newRavenCluster(t *testing.T) *harness.ControlPlane {
	cp := harness.Start(t, harness.Options{})
	cp.CreateFromFile(t, filepath.Join(ravenFixtures, "raven-proxy-dns.yaml"))
	cp.CreateFromFile(t, filepath.Join(ravenFixtures, "yurt-manager.yaml"))
	cp.ApplyConfigMap(t, harness.RavenConfig("true"))
	cp.CreateService(t, harness.RavenProxyService("10.96.100.7"))
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "192.168.0.10", Ready: true,
		Labels: map[string]string{"kubernetes.io/os": "linux", tunnelnodes.EdgeNodeLabel: "false", "node-role.kubernetes.io/control-plane": ""}})
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.1.21", Edge: true})
	return cp
}

// runSync runs a tunnel-nodes-sync subcommand against cp with a short
// --timeout and returns its output and how it ended.
func runSync(t *testing.T, cp *harness.ControlPlane, args ...string) (string, error) {
	t.Helper()
	all := append([]string{args[0], "--kubeconfig", cp.Kubeconfig, "--timeout", "20s"}, args[1:]...)
	p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), all...)
	err := p.Wait(t, 2*time.Minute)
	return p.Output(), err
}

// ravenSnapshot is what install --profile raven may change and revert must
// restore, and what it must never change (the proxy Service, the records).
func ravenSnapshot(t *testing.T, cp *harness.ControlPlane) map[string]string {
	t.Helper()
	ctx, ns := context.Background(), tunnelnodes.Namespace
	s := map[string]string{}
	put := func(name string, v any, err error) {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := json.Marshal(v)
		s[name] = string(b)
	}
	d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "raven-proxy-dns", metav1.GetOptions{})
	put("deployment/raven-proxy-dns", []any{d.Spec, d.Labels, d.Annotations["kubectl.kubernetes.io/last-applied-configuration"]}, err)
	m, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "yurt-manager", metav1.GetOptions{})
	put("deployment/yurt-manager", m.Spec, err)
	for _, name := range []string{"raven-proxy-dns", tunnelnodes.RavenGlobalConfigName} {
		cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		put("configmap/"+name, []any{cm.Data, cm.Labels, cm.Annotations}, err)
	}
	for _, name := range []string{"raven-proxy-dns", tunnelnodes.RavenServiceName} {
		svc, err := cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		put("service/"+name, []any{svc.Spec, svc.Labels, svc.Annotations}, err)
	}
	cr, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, "system:raven-proxy-dns", metav1.GetOptions{})
	put("clusterrole/system:raven-proxy-dns", cr.Rules, err)
	return s
}

// TestRavenInstallRevert: install --profile raven on a Raven-shaped cluster
// — a dry run that changes nothing and shows every change, then install:
// raven-proxy-dns runs coredns-yurt in place with a Corefile of its own and
// no records file, rolled out behind its Service; yurt-manager's gateway-dns
// controller off; the sync with --profile raven — a second install that
// changes nothing, status, and a revert that restores every object exactly.
func TestRavenInstallRevert(t *testing.T) {
	t.Parallel()
	cp := newRavenCluster(t)
	ctx, ns := context.Background(), tunnelnodes.Namespace
	stop := cp.PlayRolloutControllers(ns)
	defer stop()
	original := ravenSnapshot(t, cp)

	out, err := runSync(t, cp, "install", "--profile", "raven", "--dry-run", "--coredns-image", "coredns-yurt:test")
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	for _, want := range []string{"[raven-rbac] would: created Role kube-system/yurtdns:raven-proxy-dns", "[raven-corefile] would:",
		"-    hosts /etc/edge/tunnel-nodes {", "+        configmap kube-system/edge-tunnel-nodes", "+        service kube-system/x-raven-proxy-internal-svc",
		"[raven-proxy-dns] would:", "+    image: coredns-yurt:test", "+      name: raven-proxy-dns-yurt", "-    - mountPath: /etc/edge",
		"[gateway-dns] would:", "+-gateway-dns-controller,-nodelifecycle,*", "[raven-sync] would: created", "--profile=raven"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q", want)
		}
	}
	if strings.Contains(out, "[corefile]") || strings.Contains(out, "[kube-proxy]") || strings.Contains(out, "[control-plane]") {
		t.Errorf("yurt-tunnel steps ran under --profile raven:\n%s", out)
	}
	if changed := diffSnapshots(original, ravenSnapshot(t, cp)); len(changed) > 0 {
		t.Fatalf("dry run changed %v\n%s", changed, out)
	}

	endpoints := observeReadyEndpoints(t, cp, "raven-proxy-dns")
	out, err = runSync(t, cp, "install", "--profile", "raven", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	t.Logf("install:\n%s", out)
	endpoints.check(t, "install")
	d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "raven-proxy-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	if c := spec.Containers[0]; c.Image != "coredns-yurt:test" || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/raven-proxy-dns" ||
		len(spec.Volumes) != 1 || spec.Volumes[0].ConfigMap.Name != "raven-proxy-dns-yurt" || spec.ServiceAccountName != "raven-proxy-dns" {
		t.Errorf("raven-proxy-dns pod spec: %+v", spec)
	}
	// Rolled out: the pods that serve run coredns-yurt.
	pods, _ := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=raven-proxy-dns"})
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image != "coredns-yurt:test" {
			t.Errorf("pod %s still runs %s after install", p.Name, p.Spec.Containers[0].Image)
		}
	}
	cm, _ := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "raven-proxy-dns-yurt", metav1.GetOptions{})
	if !strings.Contains(cm.Data["Corefile"], "yurthosts {\n        configmap kube-system/edge-tunnel-nodes\n        service kube-system/x-raven-proxy-internal-svc\n        shards yurtdns-records\n        fallthrough\n    }") ||
		strings.Contains(cm.Data["Corefile"], "/etc/edge/tunnel-nodes") {
		t.Errorf("raven-proxy-dns-yurt Corefile:\n%s", cm.Data["Corefile"])
	}
	after := ravenSnapshot(t, cp)
	for _, unchanged := range []string{"configmap/raven-proxy-dns", "service/raven-proxy-dns", "service/" + tunnelnodes.RavenServiceName, "configmap/raven-cfg"} {
		if after[unchanged] != original[unchanged] {
			t.Errorf("install changed %s", unchanged)
		}
	}
	m, _ := cp.Client.AppsV1().Deployments(ns).Get(ctx, "yurt-manager", metav1.GetOptions{})
	if args := m.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--controllers=-gateway-dns-controller,-nodelifecycle,*") {
		t.Errorf("yurt-manager args %v", args)
	}
	if _, err := cp.Client.RbacV1().Roles(ns).Get(ctx, "yurtdns:raven-proxy-dns", metav1.GetOptions{}); err != nil {
		t.Errorf("raven-proxy-dns's Role: %v", err)
	}
	sync, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})
	if err != nil || sync.Spec.Template.Spec.Containers[0].Image != "tunnel-nodes-sync:test" || !slices.Contains(sync.Spec.Template.Spec.Containers[0].Args, "--profile=raven") {
		t.Errorf("sync Deployment: %v %+v", err, sync.Spec.Template.Spec.Containers)
	}

	// Again: nothing changes. Status: every step applied; revert with
	// another --profile refuses the state, which records raven.
	installed := ravenSnapshot(t, cp)
	out, err = runSync(t, cp, "install", "--profile", "raven", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test")
	// Every step says so but monitoring, skipped here: no prometheus-operator.
	ravenSteps := slices.DeleteFunc(layoutSteps(layout.Raven), func(s string) bool { return s == "monitoring" })
	if n, want := strings.Count(out, "already applied"), len(ravenSteps); err != nil || n != want || !strings.Contains(out, "[monitoring] skipped") {
		t.Errorf("second install (%v): %d steps already applied, want %d and monitoring skipped:\n%s", err, n, want, out)
	}
	if changed := diffSnapshots(installed, ravenSnapshot(t, cp)); len(changed) > 0 {
		t.Errorf("second install changed %v", changed)
	}
	out, err = runSync(t, cp, "status", "--profile", "raven")
	for _, step := range ravenSteps {
		if !strings.Contains(out, fmt.Sprintf("%-18s applied", step)) { // a detail may follow
			t.Errorf("status (%v): %s not applied:\n%s", err, step, out)
		}
	}
	if out, err := runSync(t, cp, "revert", "--profile", "yurt-tunnel"); err == nil || !strings.Contains(out, "records --profile raven") {
		t.Errorf("revert --profile yurt-tunnel: %v\n%s", err, out)
	}

	endpoints = observeReadyEndpoints(t, cp, "raven-proxy-dns")
	out, err = runSync(t, cp, "revert", "--profile", "raven")
	if err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	t.Logf("revert:\n%s", out)
	endpoints.check(t, "revert")
	if changed := diffSnapshots(original, ravenSnapshot(t, cp)); len(changed) > 0 {
		now := ravenSnapshot(t, cp)
		for _, c := range changed {
			t.Errorf("revert left %s changed:\n%s\nwant:\n%s", c, now[c], original[c])
		}
	}
	pods, _ = cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=raven-proxy-dns"})
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image != "coredns/coredns:1.9.3" {
			t.Errorf("pod %s runs %s after revert", p.Name, p.Spec.Containers[0].Image)
		}
	}
	for what, err := range map[string]error{
		"ConfigMap raven-proxy-dns-yurt": getErr(cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "raven-proxy-dns-yurt", metav1.GetOptions{})),
		"Role yurtdns:raven-proxy-dns":   getErr(cp.Client.RbacV1().Roles(ns).Get(ctx, "yurtdns:raven-proxy-dns", metav1.GetOptions{})),
		"Deployment tunnel-nodes-sync":   getErr(cp.Client.AppsV1().Deployments(ns).Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})),
		"install state":                  getErr(cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, engine.StateConfigMap, metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after revert: %v", what, err)
		}
	}

	// The layout checks: a yurt-tunnel install here hints at Raven; a
	// Raven install without raven-cfg is refused before it changes anything.
	if out, _ := runSync(t, cp, "install", "--dry-run"); !strings.Contains(out, "hint: this cluster has Raven's layout") {
		t.Errorf("no hint at --profile raven:\n%s", out)
	}
	if err := cp.Client.CoreV1().ConfigMaps(ns).Delete(ctx, tunnelnodes.RavenGlobalConfigName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := runSync(t, cp, "install", "--profile", "raven"); err == nil || !strings.Contains(out, "--profile raven: no ConfigMap kube-system/raven-cfg") {
		t.Errorf("install --profile raven without raven-cfg: %v\n%s", err, out)
	}
}

// endpointObserver polls a Service's EndpointSlices while install or revert
// rolls its pods, as kube-proxy would see them.
type endpointObserver struct {
	cp   *harness.ControlPlane
	stop chan struct{}
	done chan struct{}
	// empty counts the polls that found no ready endpoint; handover those
	// that found the handover pod's.
	polls, empty, handover int
	answered               bool
}

func observeReadyEndpoints(t *testing.T, cp *harness.ControlPlane, service string) *endpointObserver {
	o := &endpointObserver{cp: cp, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(o.done)
		for {
			select {
			case <-o.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			list, err := cp.Client.DiscoveryV1().EndpointSlices(tunnelnodes.Namespace).List(context.Background(),
				metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
			if err != nil {
				continue
			}
			ready := 0
			for _, s := range list.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Ready == nil || *e.Conditions.Ready {
						ready++
						if e.TargetRef != nil && e.TargetRef.Name == service+"-handover" {
							o.handover++
						}
					}
				}
			}
			// The Service's first pod may still be starting as the
			// observer starts: a gap counts once it has answered.
			o.polls++
			switch {
			case ready > 0:
				o.answered = true
			case o.answered:
				o.empty++
			}
		}
	}()
	return o
}

// check: the Service had a ready endpoint at every poll, the handover pod
// among them for a while, and neither the handover pod nor its
// EndpointSlice is left.
func (o *endpointObserver) check(t *testing.T, what string) {
	t.Helper()
	close(o.stop)
	<-o.done
	t.Logf("%s: %d polls of raven-proxy-dns's EndpointSlices, %d without a ready endpoint, %d with the handover pod's", what, o.polls, o.empty, o.handover)
	if !o.answered || o.empty > 0 || o.handover == 0 {
		t.Errorf("%s: raven-proxy-dns had no ready endpoint at %d of %d polls, the handover pod's at %d", what, o.empty, o.polls, o.handover)
	}
	ctx := context.Background()
	if _, err := o.cp.Client.CoreV1().Pods(tunnelnodes.Namespace).Get(ctx, "raven-proxy-dns-handover", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s left the handover pod: %v", what, err)
	}
	if _, err := o.cp.Client.DiscoveryV1().EndpointSlices(tunnelnodes.Namespace).Get(ctx, "raven-proxy-dns-handover", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s left the handover EndpointSlice: %v", what, err)
	}
}
