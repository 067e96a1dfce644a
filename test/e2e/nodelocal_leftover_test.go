package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/nodelocal/leftover"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestRevertLeavesNodeLocalForwarder: revert of NodeLocal DNS with a pod
// still resolving at 169.254.20.10 (made while its node was switched) hands
// the address to the leftover forwarder, pinned to that node, instead of
// refusing; every leftover object is owned by its ClusterRole. envtest runs
// no DaemonSet controller, kubelet or garbage collector: the forwarder never
// becomes Ready, so revert stops before it deletes the caches (the address
// never goes dark), and what the API shows is checked.
func TestRevertLeavesNodeLocalForwarder(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	// The state of an install --node-local-dns whose kubelets on worker-1
	// and worker-2 were switched an hour ago and are back (restoreNodes
	// ran), a pod made in between on each.
	since, until := metav1.NewTime(time.Now().Add(-time.Hour)), metav1.NewTime(time.Now().Add(time.Hour))
	records := map[string]engine.Record{}
	for i, node := range []string{"worker-1", "worker-2"} {
		cp.CreateNode(t, harness.Node{Name: node, InternalIP: fmt.Sprintf("192.168.0.%d", 21+i), Edge: true, Ready: true})
		stranded := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + node, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Image: "web:1"}}}}
		if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, stranded, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		records["kubelet "+node] = engine.Record{Kubelet: &engine.KubeletRecord{Node: node, Image: "tunnel-nodes-sync:test", Since: &since, Until: &until}}
	}
	step, err := json.Marshal(engine.StepState{Applied: true, Records: records})
	if err != nil {
		t.Fatal(err)
	}
	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: engine.StateConfigMap, Namespace: tunnelnodes.Namespace,
		Annotations: map[string]string{engine.ProfileAnnotation: layout.YurtTunnel}}, Data: map[string]string{"node-local-dns": string(step)}}
	if _, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Create(ctx, state, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	revert := func() string {
		t.Helper()
		p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), "revert", "--kubeconfig", cp.Kubeconfig, "--timeout", "3s",
			"--sync-image", "tunnel-nodes-sync:test")
		err := p.Wait(t, time.Minute)
		if out := p.Output(); err == nil || !strings.Contains(out, "leftover forwarder on node worker-1 not Ready after 3s") {
			t.Fatalf("revert with the forwarder not Ready: want it to wait for it, got %v:\n%s", err, out)
		}
		return p.Output()
	}
	revert()

	cr, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, leftover.ClusterRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ownedByRole := func(what string, refs []metav1.OwnerReference, uid types.UID) {
		t.Helper()
		if len(refs) != 1 || refs[0].Kind != "ClusterRole" || refs[0].Name != leftover.ClusterRole || refs[0].UID != uid ||
			refs[0].BlockOwnerDeletion == nil || *refs[0].BlockOwnerDeletion {
			t.Errorf("%s: ownerReferences %+v, want ClusterRole %s (%s) only, not blocking", what, refs, leftover.ClusterRole, uid)
		}
	}
	check := func() {
		t.Helper()
		ds, err := cp.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, leftover.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ownedByRole("DaemonSet", ds.OwnerReferences, cr.UID)
		if img := ds.Spec.Template.Spec.Containers[1].Image; img != "tunnel-nodes-sync:test" {
			t.Errorf("linger runs %s, want --sync-image's", img)
		}
		var pinned []string
		for _, term := range ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				pinned = append(pinned, f.Key+" "+string(f.Operator)+" "+strings.Join(f.Values, ","))
			}
		}
		if want := []string{"metadata.name In worker-1", "metadata.name In worker-2"}; !slices.Equal(pinned, want) {
			t.Errorf("DaemonSet pinned to %v, want %v", pinned, want)
		}
		cm, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, leftover.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ownedByRole("ConfigMap", cm.OwnerReferences, cr.UID)
		windows, err := leftover.Windows(cm.Data)
		if w := windows["worker-2"]; err != nil || len(windows) != 2 || !w.Since.Equal(since.Time.Truncate(time.Second)) || !w.Until.Equal(until.Time.Truncate(time.Second)) {
			t.Errorf("ConfigMap windows %v (%v), want worker-1 and worker-2 from %s until %s", windows, err, since, until)
		}
		sa, err := cp.Client.CoreV1().ServiceAccounts(tunnelnodes.Namespace).Get(ctx, leftover.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ownedByRole("ServiceAccount", sa.OwnerReferences, cr.UID)
		crb, err := cp.Client.RbacV1().ClusterRoleBindings().Get(ctx, leftover.ClusterRole, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ownedByRole("ClusterRoleBinding", crb.OwnerReferences, cr.UID)
		role, err := cp.Client.RbacV1().Roles(tunnelnodes.Namespace).Get(ctx, leftover.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ownedByRole("Role", role.OwnerReferences, cr.UID)
		rb, err := cp.Client.RbacV1().RoleBindings(tunnelnodes.Namespace).Get(ctx, leftover.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ownedByRole("RoleBinding", rb.OwnerReferences, cr.UID)
	}
	check()
	// revert run again while the leftover is there changes nothing.
	revert()
	check()

	p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), "status", "--kubeconfig", cp.Kubeconfig)
	_ = p.Wait(t, time.Minute)
	if want := "leftover forwarder on 169.254.20.10 for pods still resolving there: worker-1 (1 pods), worker-2 (1 pods)"; !strings.Contains(p.Output(), want) {
		t.Errorf("status does not say %q:\n%s", want, p.Output())
	}

	// The linger's last act: the ClusterRole goes, and every other object
	// names an owner that no longer exists, which the garbage collector of
	// a real cluster deletes them for.
	if err := cp.Client.RbacV1().ClusterRoles().Delete(ctx, leftover.ClusterRole, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, leftover.ClusterRole, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("ClusterRole after its delete: %v", err)
	}
	check()
}
