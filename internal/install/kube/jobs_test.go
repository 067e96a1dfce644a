package kube

import (
	"context"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
