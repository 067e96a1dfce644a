package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestInstallUpgradesInPlace: install over objects an earlier version
// created (plain creates, fields owned by its client's name) moves them to
// this version's, drops what this version no longer sets, keeps what others
// set, shows it first with --dry-run, and refuses a downgrade unless
// forced; revert afterwards leaves the cluster as before the first install.
func TestInstallUpgradesInPlace(t *testing.T) {
	t.Parallel()
	k := newKubeadmCluster(t)
	ctx := context.Background()
	original := k.snapshot(t)
	stop := k.PlayRolloutControllers(tunnelnodes.Namespace)
	defer stop()
	images := []string{"--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test"}
	if out, err := k.run(t, append([]string{"install"}, images...)...); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}

	// As an install from before v0.1.0 left them: the sync's Role with a
	// rule this version dropped, its Deployment on the old image, and no
	// version in the state. An operator's annotation rides along.
	roles := k.Client.RbacV1().Roles(tunnelnodes.Namespace)
	role, err := roles.Get(ctx, "yurtdns:tunnel-nodes-sync", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := roles.Delete(ctx, role.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := role.Rules
	old := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace, Labels: role.Labels},
		Rules: append(want[:len(want):len(want)], rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"gone-in-this-version"}})}
	if _, err := roles.Create(ctx, old, metav1.CreateOptions{FieldManager: kube.InstallUserAgent}); err != nil {
		t.Fatal(err)
	}
	deployments := k.Client.AppsV1().Deployments(tunnelnodes.Namespace)
	d, err := deployments.Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "tunnel-nodes-sync:earlier"
	if d, err = deployments.Update(ctx, d, metav1.UpdateOptions{FieldManager: kube.InstallUserAgent}); err != nil {
		t.Fatal(err)
	}
	metav1.SetMetaDataAnnotation(&d.ObjectMeta, "example.com/owner", "ops")
	if _, err = deployments.Update(ctx, d, metav1.UpdateOptions{FieldManager: "kubectl-annotate"}); err != nil {
		t.Fatal(err)
	}
	setStateVersion(t, k, "")

	status, _ := k.run(t, "status")
	if !strings.Contains(status, "installed by yurtdns from before v0.1.0 (no version recorded): install upgrades it") {
		t.Errorf("status over an earlier version's install:\n%s", status)
	}

	out, err := k.run(t, append([]string{"install", "--dry-run"}, images...)...)
	if err != nil {
		t.Fatalf("install --dry-run: %v\n%s", err, out)
	}
	for _, want := range []string{"[sync] would: updated Role kube-system/yurtdns:tunnel-nodes-sync, Deployment kube-system/tunnel-nodes-sync", "-  - gone-in-this-version", "-        image: tunnel-nodes-sync:earlier", "+        image: tunnel-nodes-sync:test"} {
		if !strings.Contains(out, want) {
			t.Errorf("install --dry-run lacks %q:\n%s", want, out)
		}
	}
	// (The Deployment's status moves on as its rollout plays out: its spec and the Role tell.)
	if r, err := roles.Get(ctx, role.Name, metav1.GetOptions{}); err != nil || len(r.Rules) != len(want)+1 {
		t.Errorf("install --dry-run changed the Role: %+v (%v)", r.Rules, err)
	}
	if d, err := deployments.Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{}); err != nil || d.Spec.Template.Spec.Containers[0].Image != "tunnel-nodes-sync:earlier" {
		t.Errorf("install --dry-run changed the Deployment (%v)", err)
	}

	out, err = k.run(t, append([]string{"install"}, images...)...)
	if err != nil || !strings.Contains(out, "[sync] updated Role kube-system/yurtdns:tunnel-nodes-sync, Deployment kube-system/tunnel-nodes-sync") {
		t.Fatalf("install over the earlier version (%v):\n%s", err, out)
	}
	role, err = roles.Get(ctx, role.Name, metav1.GetOptions{})
	if err != nil || len(role.Rules) != len(want) {
		t.Errorf("the Role after the upgrade: %+v (%v), want the rules %+v", role.Rules, err, want)
	}
	d, err = deployments.Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})
	if err != nil || d.Spec.Template.Spec.Containers[0].Image != "tunnel-nodes-sync:test" || d.Annotations["example.com/owner"] != "ops" {
		t.Errorf("the Deployment after the upgrade: image %s, annotations %v (%v)", d.Spec.Template.Spec.Containers[0].Image, d.Annotations, err)
	}
	if out, err := k.run(t, append([]string{"install"}, images...)...); err != nil || strings.Contains(out, "updated") {
		t.Errorf("install once more changed something (%v):\n%s", err, out)
	}

	// A newer version's install: this binary refuses to downgrade it.
	setStateVersion(t, k, "v99.0.0")
	out, err = k.run(t, append([]string{"install"}, images...)...)
	if err == nil || !strings.Contains(out, "the cluster runs yurtdns v99.0.0, newer than this binary") {
		t.Errorf("install over a newer version must refuse (%v):\n%s", err, out)
	}
	if status, _ := k.run(t, "status"); !strings.Contains(status, "yurtdns v99.0.0 installed, newer than this binary") {
		t.Errorf("status over a newer version:\n%s", status)
	}
	if out, err := k.run(t, append([]string{"install", "--force"}, images...)...); err != nil {
		t.Errorf("install --force over a newer version: %v\n%s", err, out)
	}

	// Revert after the upgrades leaves kubeadm's objects and manifests byte for byte as they were.
	if out, err := k.run(t, "revert"); err != nil {
		t.Fatalf("revert after the upgrade: %v\n%s", err, out)
	}
	if changed := diffSnapshots(original, k.snapshot(t)); len(changed) > 0 {
		t.Errorf("revert after the upgrade left %v changed", changed)
	}
}

// setStateVersion sets the version the install state records; "" removes it.
func setStateVersion(t *testing.T, k *kubeadmCluster, v string) {
	t.Helper()
	cms := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace)
	cm, err := cms.Get(context.Background(), engine.StateConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v == "" {
		delete(cm.Annotations, engine.VersionAnnotation)
	} else {
		metav1.SetMetaDataAnnotation(&cm.ObjectMeta, engine.VersionAnnotation, v)
	}
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestInstallRollsCoreDNSThroughADrain: install with another coredns image
// replaces each node's coredns pod itself, not by the DaemonSet's own
// rolling update (which deletes the old pod behind kube-dns's back): the
// new pod is Ready beside the old one, the old one drains (kube-dns's drain
// slice lists it serving and terminating) before install deletes it, and
// afterwards the DaemonSet's rolling update is as install leaves it.
func TestInstallRollsCoreDNSThroughADrain(t *testing.T) {
	k := newKubeadmCluster(t)
	ctx := context.Background()
	stop := k.PlayRolloutControllers(tunnelnodes.Namespace)
	defer stop()
	if out, err := k.run(t, "install", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test"); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	pods := k.Client.CoreV1().Pods(tunnelnodes.Namespace)
	selector := metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"}
	list, err := pods.List(ctx, selector)
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("coredns pods after install: %v (%v)", list, err)
	}
	// What is seen of each old pod, polled while install runs.
	type seen struct {
		drained, replaced, gone bool // drained and replaced: before it went
		goneDraining            bool // gone while the drain slice still listed it
	}
	old := map[types.UID]*seen{}
	for _, p := range list.Items {
		old[p.UID] = &seen{}
	}
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			now, err1 := pods.List(ctx, selector)
			drain, err2 := k.Client.DiscoveryV1().EndpointSlices(tunnelnodes.Namespace).Get(ctx, "kube-dns-drain", metav1.GetOptions{})
			if err1 != nil || err2 != nil && !apierrors.IsNotFound(err2) {
				continue
			}
			// The drain slice is read after the pods: a pod install deleted
			// is never seen gone while it still lists it.
			draining := func(uid types.UID) bool {
				return err2 == nil && slices.ContainsFunc(drain.Endpoints, func(e discoveryv1.Endpoint) bool {
					return e.TargetRef.UID == uid && *e.Conditions.Serving && *e.Conditions.Terminating
				})
			}
			for uid, s := range old {
				i := slices.IndexFunc(now.Items, func(p corev1.Pod) bool { return p.UID == uid })
				if i < 0 || now.Items[i].DeletionTimestamp != nil {
					if !s.gone && draining(uid) {
						s.goneDraining = true
					}
					s.gone = true
					continue
				}
				p := now.Items[i]
				if draining(uid) {
					s.drained = true
				}
				s.replaced = slices.ContainsFunc(now.Items, func(n corev1.Pod) bool {
					return n.Spec.NodeName == p.Spec.NodeName && n.UID != p.UID && kubewait.PodReady(&n) &&
						n.Spec.Containers[0].Image == "coredns-yurt:next"
				})
			}
		}
	}()
	out, err := k.run(t, "install", "--coredns-image", "coredns-yurt:next", "--sync-image", "tunnel-nodes-sync:test")
	close(done)
	<-watched
	if err != nil || !strings.Contains(out, "DaemonSet coredns updated and rolled out") {
		t.Fatalf("install with another coredns image (%v):\n%s", err, out)
	}
	for uid, s := range old {
		if !s.gone || !s.drained || !s.replaced || s.goneDraining {
			t.Errorf("old coredns pod %s: gone %t, drained before %t, a Ready new pod beside it before %t, gone while still draining %t",
				uid, s.gone, s.drained, s.replaced, s.goneDraining)
		}
	}
	ds, err := k.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, tunnelnodes.CoreDNSName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ru := ds.Spec.UpdateStrategy.RollingUpdate; ds.Spec.MinReadySeconds != 5 || ru == nil || ru.MaxSurge.String() != "10%" {
		t.Errorf("the DaemonSet after the roll: minReadySeconds %d, rolling update %+v: want 5 and maxSurge 10%% as install leaves it", ds.Spec.MinReadySeconds, ru)
	}
	svc, err := k.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil || len(svc.Spec.Selector) != 1 {
		t.Errorf("kube-dns's selector after the roll: %v (%v)", svc.Spec.Selector, err)
	}
}
