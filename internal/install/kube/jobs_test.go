package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// A Job a failed run left is deleted so the next run creates it again;
// a running or complete one is kept.
func TestDeleteFailedJob(t *testing.T) {
	ctx := context.Background()
	job := func(name string, cond batchv1.JobConditionType) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: name}}
		if cond != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue}}
		}
		return j
	}
	c := fake.NewClientBuilder().WithObjects(job("failed", batchv1.JobFailed), job("running", ""), job("complete", batchv1.JobComplete)).Build()
	env := &engine.Env{Client: c, Options: engine.Options{Timeout: 5 * time.Second}}
	for _, name := range []string{"failed", "running", "complete", "absent"} {
		if err := DeleteFailedJob(ctx, env, name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := c.Get(ctx, Key(name), &batchv1.Job{})
		if gone := apierrors.IsNotFound(err); gone != (name == "failed" || name == "absent") {
			t.Errorf("Job %s: gone = %v", name, gone)
		}
	}
}

// A Job's failure is named as one; an error reading its pods is that error,
// not a failure with no reason.
func TestWaitJobCompleteErrors(t *testing.T) {
	ctx := context.Background()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "patch"}}
	failedPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "patch-x", Labels: map[string]string{"batch.kubernetes.io/job-name": "patch"}},
		Status:     corev1.PodStatus{Phase: corev1.PodFailed},
	}
	for _, tc := range []struct {
		name    string
		objects []client.Object
		listErr error
		want    string
		notWant string
	}{
		{name: "a pod failed", objects: []client.Object{job, failedPod}, want: "Job patch failed: pod patch-x"},
		{name: "its pods unreadable", objects: []client.Object{job}, listErr: errors.New("etcd lost its quorum"),
			want: "listing the pods of Job patch: etcd lost its quorum", notWant: "failed:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(tc.objects...).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if tc.listErr != nil {
						return tc.listErr
					}
					return c.List(ctx, list, opts...)
				},
			}).Build()
			env := &engine.Env{Client: c, Options: engine.Options{Timeout: 5 * time.Second}}
			err := WaitJobComplete(ctx, env, "patch")
			if err == nil || !strings.Contains(err.Error(), tc.want) || tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("WaitJobComplete: %v, want %q", err, tc.want)
			}
		})
	}
}
