package install

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Revert's restore Jobs run the image install's patch Jobs ran (recorded in
// the state: an offline cluster has it), unless --sync-image says otherwise.
func TestRestoreJobsUseTheRecordedImage(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}
	for _, tc := range []struct{ flag, want string }{{"", "registry.local/tunnel-nodes-sync:v1"}, {"registry.local/tunnel-nodes-sync:v2", "registry.local/tunnel-nodes-sync:v2"}} {
		c := fake.NewClientBuilder().WithObjects(node).WithStatusSubresource(&batchv1.Job{}).Build()
		env := &Env{Client: c, Options: Options{Timeout: 10 * time.Second, ControlPlaneJobs: true, SyncImage: tc.flag}}
		ss := newStepState()
		ss.Records["jobs"] = record{After: "master-1"}
		ss.Records[jobImageRecord] = record{After: "registry.local/tunnel-nodes-sync:v1"}
		restore := manifestJob("master-1", "restore", "", Options{}).Name
		done := make(chan error, 1)
		go func() { _, err := controlPlaneStep().Revert(ctx, env, ss); done <- err }()
		job := &batchv1.Job{}
		for deadline := time.Now().Add(5 * time.Second); c.Get(ctx, key(restore), job) != nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no restore Job")
			}
		}
		if got := job.Spec.Template.Spec.Containers[0].Image; got != tc.want {
			t.Errorf("--sync-image %q: restore Job image %q, want %q", tc.flag, got, tc.want)
		}
		completeJob(t, c, restore)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A Job that fails is reported as soon as it fails, not after the timeout:
// a pod that cannot pull its image, a pod that exited non-zero, the Failed
// condition.
func TestJobFailureReportedAtOnce(t *testing.T) {
	ctx := context.Background()
	job := manifestJob("master-1", "restore", "tunnel-nodes-sync:test", Options{})
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever || *job.Spec.BackoffLimit != 0 {
		t.Errorf("the Job retries (restartPolicy %s, backoffLimit %d): a failure would show only after the retries", job.Spec.Template.Spec.RestartPolicy, *job.Spec.BackoffLimit)
	}
	pod := func(status corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-x", Labels: map[string]string{"batch.kubernetes.io/job-name": job.Name}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "patch-manifests", State: status}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		cond *batchv1.JobCondition
		want string
	}{
		{"image", pod(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image not present"}}), nil, "cannot start: ErrImageNeverPull: image not present"},
		{"exit", pod(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}), nil, "exited with 1: Error"},
		{"condition", nil, &batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Message: "Job has reached the specified backoff limit"}, "failed: Job has reached the specified backoff limit"},
	} {
		j := job.DeepCopy()
		if tc.cond != nil {
			j.Status.Conditions = []batchv1.JobCondition{*tc.cond}
		}
		b := fake.NewClientBuilder().WithObjects(j)
		if tc.pod != nil {
			b = b.WithObjects(tc.pod)
		}
		env := &Env{Client: b.Build(), Options: Options{Timeout: time.Minute}}
		start := time.Now()
		err := waitJobComplete(ctx, env, job.Name)
		if err == nil || !strings.Contains(err.Error(), tc.want) || time.Since(start) > 5*time.Second {
			t.Errorf("%s: %v after %s; want %q at once", tc.name, err, time.Since(start), tc.want)
		}
	}
	// Without a Job there is nothing to wait for: an error, not a timeout.
	env := &Env{Client: fake.NewClientBuilder().Build(), Options: Options{Timeout: time.Minute}}
	if err := waitJobComplete(ctx, env, job.Name); !apierrors.IsNotFound(err) {
		t.Errorf("missing Job: %v", err)
	}
}
