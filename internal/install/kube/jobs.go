package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/staticpod"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeleteFailedJob deletes a Job that a failed install or revert left, so
// that running it again is the retry (the Jobs themselves never retry).
func DeleteFailedJob(ctx context.Context, env *engine.Env, name string) error {
	return deleteJobIf(ctx, env, name, false)
}

// DeleteFinishedJob deletes a Job that failed or completed, so that it runs
// anew: a manifest Job whose work a kubeadm upgrade undid since.
func DeleteFinishedJob(ctx context.Context, env *engine.Env, name string) error {
	return deleteJobIf(ctx, env, name, true)
}

func deleteJobIf(ctx context.Context, env *engine.Env, name string, complete bool) error {
	var job batchv1.Job
	err := env.Client.Get(ctx, Key(name), &job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	why, err := JobFailure(ctx, env, &job)
	if err != nil || (why == "" && !(complete && JobCondition(&job, batchv1.JobComplete))) {
		return err
	}
	if err := env.Client.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the finished Job %s: %w", name, err)
	}
	return kubewait.For(ctx, env.Options.Timeout, "finished Job "+name+" not gone", func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, Key(name), &batchv1.Job{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
}

// JobTimeout bounds the wait for a manifest Job: each manifest it patches
// may take a --timeout to come back, and one that does not, another to come
// back from its backup (the Job's own waits, with the same --timeout).
func JobTimeout(env *engine.Env) time.Duration {
	return env.Options.Timeout * time.Duration(2*len(staticpod.ControlPlanePatches)+1)
}

// WaitJobComplete waits for the Job to complete and reports its failure as
// soon as it shows: a Failed (or FailureTarget) condition, a failed pod, or
// a pod that cannot start (its image cannot be pulled, say) — not after the
// whole timeout.
func WaitJobComplete(ctx context.Context, env *engine.Env, name string) error {
	return kubewait.For(ctx, JobTimeout(env), "Job "+name+" not complete", func(ctx context.Context) (bool, string, error) {
		job := &batchv1.Job{}
		if err := env.Client.Get(ctx, Key(name), job); err != nil {
			return false, "", err
		}
		if JobCondition(job, batchv1.JobComplete) {
			return true, "", nil
		}
		why, err := JobFailure(ctx, env, job)
		if err != nil {
			// Not the Job's failure: For waits out an apiserver that is away.
			return false, "", err
		}
		if why != "" {
			return false, "", fmt.Errorf("Job %s failed: %s (kubectl -n %s logs job/%s)", name, why, tunnelnodes.Namespace, name)
		}
		return false, fmt.Sprintf("%d active, %d failed", job.Status.Active, job.Status.Failed), nil
	})
}

func JobCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == t && c.Status == corev1.ConditionTrue
	})
}

// JobFailure says why the Job failed, or "": its Failed (or FailureTarget)
// condition, a failed pod, or a pod that cannot start — whichever shows
// first (the Jobs never retry: backoffLimit 0).
func JobFailure(ctx context.Context, env *engine.Env, job *batchv1.Job) (string, error) {
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) {
			return strings.TrimSpace(fmt.Sprintf("%s: %s %s", c.Type, c.Reason, c.Message)), nil
		}
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace), client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name}); err != nil {
		return "", fmt.Errorf("listing the pods of Job %s: %w", job.Name, err)
	}
	for _, p := range pods.Items {
		if why := PodFailure(&p); why != "" {
			return "pod " + p.Name + " " + why, nil
		}
	}
	return "", nil
}

// PodFailure says why a pod failed or cannot start, or "".
func PodFailure(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError":
				return fmt.Sprintf("cannot start: %s: %s", w.Reason, w.Message)
			}
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("exited with %d: %s", t.ExitCode, strings.TrimSpace(t.Reason+" "+t.Message))
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		return "failed: " + strings.TrimSpace(p.Status.Reason+" "+p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "cannot be scheduled: " + c.Message
		}
	}
	return ""
}
