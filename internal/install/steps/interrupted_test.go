package steps

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// valueEdit is a kube.FieldEdit over one in-memory value, counting writes.
func valueEdit(value *string, writes *int) kube.FieldEdit {
	return kube.FieldEdit{
		Key: "value",
		Get: func(context.Context, *engine.Env) (string, bool, error) { return *value, true, nil },
		Set: func(_ context.Context, _ *engine.Env, v string, _ bool) error {
			*value = v
			*writes++
			return nil
		},
		Desired: func(*engine.Env, string, bool) (string, error) { return "new", nil },
	}
}

func newStepState() *engine.StepState {
	return &engine.StepState{Records: map[string]engine.Record{}, Persist: func(context.Context) error { return nil }}
}

// An install killed after a fieldStep wrote its value but before the action
// after the write (kube-proxy's rolling restart): the next install finds the
// value already written and must still run the action; once the step is
// applied, it runs nothing.
func TestFieldStepCompletesInterruptedAction(t *testing.T) {
	ctx := context.Background()
	env := &engine.Env{}
	value, writes, actions := "old", 0, 0
	edit := valueEdit(&value, &writes)
	step := fieldStep("s", "did it", edit, func(context.Context, *engine.Env) error { actions++; return nil })

	// The killed install: the write-ahead record and the write, no action.
	ss := newStepState()
	if changed, _, err := edit.Install(ctx, env, ss); err != nil || !changed || value != "new" {
		t.Fatalf("install: changed %v, %v, value %q", changed, err, value)
	}

	res, err := step.Install(ctx, env, ss)
	if err != nil || actions != 1 || !res.Changed || !strings.Contains(res.Summary, "interrupted") {
		t.Fatalf("install after the kill: %+v, %v, %d actions; want the action run once", res, err, actions)
	}
	if writes != 1 || ss.Records["value"].Before != "old" || ss.Records["value"].After != "new" {
		t.Errorf("install after the kill: %d writes, record %+v; want 1 write and the original kept", writes, ss.Records["value"])
	}
	ss.Applied = true
	if res, err := step.Install(ctx, env, ss); err != nil || actions != 1 || res.Changed {
		t.Errorf("install of the applied step: %+v, %v, %d actions; want nothing done", res, err, actions)
	}
}

// Revert after an install killed between the write-ahead record and the
// write: the value is still the original, so there is nothing to restore
// (and nothing to report as changed by the user).
func TestFieldEditRevertBeforeTheWrite(t *testing.T) {
	ctx := context.Background()
	value, writes := "old", 0
	edit := valueEdit(&value, &writes)
	ss := newStepState()
	ss.Records["value"] = engine.Record{Before: "old", After: "new"} // saved; the write never happened
	outcome, _, err := edit.Revert(ctx, &engine.Env{}, ss)
	if err != nil || outcome != kube.StillOriginal || writes != 0 || value != "old" {
		t.Errorf("revert: outcome %v, %v, %d writes, value %q; want nothing to restore", outcome, err, writes, value)
	}
	value = "user's"
	if outcome, _, _ := edit.Revert(ctx, &engine.Env{}, ss); outcome != kube.ChangedSince || value != "user's" {
		t.Errorf("revert of a value changed since: outcome %v, value %q", outcome, value)
	}
	if res, err := fieldStep("s", "did it", edit, nil).Revert(ctx, &engine.Env{}, ss); err != nil || res.Changed || !strings.Contains(res.Summary, "changed since install") {
		t.Errorf("revert step of a value changed since: %+v, %v", res, err)
	}
}

// A revert killed after restoring a fieldStep's value but before the action
// after the write: the next revert finds the original back with the restore
// recorded and must still run the action, whether the install it reverts
// had finished the step or was itself killed after writing.
func TestFieldStepCompletesInterruptedRevert(t *testing.T) {
	for _, installApplied := range []bool{true, false} {
		t.Run(fmt.Sprintf("install applied %v", installApplied), func(t *testing.T) {
			ctx := context.Background()
			value, writes, actions := "new", 0, 0
			edit := valueEdit(&value, &writes)
			step := fieldStep("s", "did it", edit, func(context.Context, *engine.Env) error { actions++; return nil })
			ss := newStepState()
			ss.Records["value"] = engine.Record{Before: "old", After: "new"}
			ss.Applied = installApplied

			// The killed revert: the value restored, no action.
			if outcome, _, err := edit.Revert(ctx, &engine.Env{}, ss); err != nil || outcome != kube.Restored || value != "old" {
				t.Fatalf("revert: outcome %v, %v, value %q", outcome, err, value)
			}
			res, err := step.Revert(ctx, &engine.Env{}, ss)
			if err != nil || actions != 1 || !res.Changed || !strings.Contains(res.Summary, "interrupted revert") {
				t.Fatalf("revert after the kill: %+v, %v, %d actions; want the action run once", res, err, actions)
			}
			if writes != 1 || value != "old" {
				t.Errorf("revert after the kill: %d writes, value %q; want the one restoring write", writes, value)
			}
		})
	}

	// A step install never wrote (interrupted before the write) runs nothing.
	value, writes, actions := "old", 0, 0
	step := fieldStep("s", "did it", valueEdit(&value, &writes), func(context.Context, *engine.Env) error { actions++; return nil })
	fresh := newStepState()
	fresh.Records["value"] = engine.Record{Before: "old", After: "new"}
	if res, err := step.Revert(context.Background(), &engine.Env{}, fresh); err != nil || actions != 0 || res.Changed || writes != 0 {
		t.Errorf("revert of a step never written: %+v, %v, %d actions, %d writes; want nothing done", res, err, actions, writes)
	}
}

// A revert killed after scaling the coredns Deployment back but before it
// was available (and the DaemonSet deleted): the next revert finds the
// replicas already restored and must still wait for the Deployment — its
// pods Ready and ready endpoints of kube-dns — before deleting the
// DaemonSet, keeping the DaemonSet until they are.
func TestCoreDNSRevertWaitsAfterInterruptedRevert(t *testing.T) {
	ctx := context.Background()
	meta := metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.CoreDNSName}
	d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: new(int32(2)), // scaled back, no pod up yet
		Selector: &metav1.LabelSelector{}}}
	d.UID = "deployment-1"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: kube.KubeDNSService},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"k8s-app": "kube-dns"}}}
	c := fake.NewClientBuilder().WithObjects(d, svc, &appsv1.DaemonSet{ObjectMeta: meta}).Build()
	env := &engine.Env{Client: c, Options: engine.Options{Timeout: 300 * time.Millisecond}}
	step := corednsDaemonSetStep()
	ss := newStepState()
	ss.Applied = true
	ss.Records["DaemonSet kube-system/coredns"] = engine.Record{Created: true}
	ss.Records["Deployment kube-system/coredns replicas"] = engine.Record{Before: "2", After: "0", Restoring: true} // as the killed revert saved it

	_, err := step.Revert(ctx, env, ss)
	if err == nil || !strings.Contains(err.Error(), "Deployment coredns not available") {
		t.Errorf("revert with the Deployment unavailable: %v; want it to wait and fail", err)
	}
	if err := c.Get(ctx, kube.Key(tunnelnodes.CoreDNSName), &appsv1.DaemonSet{}); err != nil {
		t.Fatalf("revert deleted the DaemonSet while the Deployment was unavailable: %v", err)
	}

	if err := c.Get(ctx, kube.Key(tunnelnodes.CoreDNSName), d); err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, AvailableReplicas: 2}
	if err := c.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	// Available by its status, but its pods are not kube-dns endpoints yet.
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "coredns-1", UID: "rs-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: tunnelnodes.CoreDNSName, UID: d.UID, Controller: new(true)}}}}
	if err := c.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	for i, ip := range []string{"10.244.0.2", "10.244.0.3"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: fmt.Sprintf("coredns-1-%d", i),
			Labels:          map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: new(true)}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := step.Revert(ctx, env, ss); err == nil || !strings.Contains(err.Error(), "0 of 2 pod IPs are ready endpoints") {
		t.Errorf("revert with the Deployment's pods not behind kube-dns: %v; want it to wait and fail", err)
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "kube-dns-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: kube.KubeDNSService}}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.2"}}, {Addresses: []string{"10.244.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: new(true)}}}}
	if err := c.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}
	if res, err := step.Revert(ctx, env, ss); err != nil || !res.Changed {
		t.Fatalf("revert with the Deployment available: %+v, %v", res, err)
	}
	if err := c.Get(ctx, kube.Key(tunnelnodes.CoreDNSName), &appsv1.DaemonSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("DaemonSet after the revert: %v; want it deleted", err)
	}
}

// completeJob marks a Job Complete, as the Job controller would.
func completeJob(t *testing.T, c client.Client, name string) {
	t.Helper()
	job := &batchv1.Job{}
	if err := c.Get(context.Background(), kube.Key(name), job); err != nil {
		t.Fatal(err)
	}
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

// A revert after an install interrupted while its patch Job was still
// running (--control-plane-jobs): the restore Job must not start before the
// patch Job is done, or the patch would land after the restore.
func TestControlPlaneJobsRevertWaitsForPatchJobs(t *testing.T) {
	ctx := context.Background()
	const image = "example/tunnel-nodes-sync:test"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}
	patch := manifestJob("master-1", "patch", image, "/etc/kubernetes/patches", false, engine.Options{})
	c := fake.NewClientBuilder().WithObjects(node, patch).WithStatusSubresource(&batchv1.Job{}).Build()
	env := &engine.Env{Client: c, Options: engine.Options{Timeout: 300 * time.Millisecond, ControlPlaneJobs: true, SyncImage: image}}
	ss := newStepState()
	ss.Records[engine.JobsRecordKey] = engine.Record{Jobs: &engine.JobsRecord{Nodes: []string{"master-1"}}}
	ss.Records[kube.ObjectKey(kube.ToUnstructured(patch, "batch/v1", "Job"))] = engine.Record{Created: true}
	step := controlPlaneStep()
	restoreName := manifestJob("master-1", "restore", image, "/etc/kubernetes/patches", false, engine.Options{}).Name

	if _, err := step.Revert(ctx, env, ss); err == nil || !strings.Contains(err.Error(), "patch Job "+patch.Name) {
		t.Fatalf("revert with the patch Job running: %v; want it to wait for it and fail", err)
	}
	if err := c.Get(ctx, kube.Key(restoreName), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("restore Job created while the patch Job ran: %v", err)
	}

	completeJob(t, c, patch.Name)
	env.Options.Timeout = 10 * time.Second
	done := make(chan error, 1)
	go func() { _, err := step.Revert(ctx, env, ss); done <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for c.Get(ctx, kube.Key(restoreName), &batchv1.Job{}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no restore Job after the patch Job completed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	completeJob(t, c, restoreName)
	if err := <-done; err != nil {
		t.Fatalf("revert: %v", err)
	}
	for _, name := range []string{patch.Name, restoreName} {
		if err := c.Get(ctx, kube.Key(name), &batchv1.Job{}); !apierrors.IsNotFound(err) {
			t.Errorf("Job %s after the revert: %v; want it deleted", name, err)
		}
	}
}
