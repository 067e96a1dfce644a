package install

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The control-plane step with --control-plane-jobs: a Job on each
// control-plane node runs `patch-manifests` (or its revert) there.

// On a control-plane node the Jobs mount the host's /etc/kubernetes, so the
// backups sit next to the manifests directory, on the same filesystem.
const (
	hostKubernetesDir = "/etc/kubernetes"
	jobMount          = "/host/etc/kubernetes"
	jobLabel          = "yurtdns.io/job"
)

// controlPlaneNodes finds the nodes running kube-apiserver or
// kube-controller-manager (their mirror pods), else the nodes labelled
// node-role.kubernetes.io/control-plane.
func controlPlaneNodes(ctx context.Context, env *Env) ([]string, error) {
	var nodes []string
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace), client.MatchingLabels{"tier": "control-plane"}); err != nil {
		return nil, fmt.Errorf("listing control-plane pods: %w", err)
	}
	for _, p := range pods.Items {
		c := p.Labels["component"]
		if (c == "kube-apiserver" || c == "kube-controller-manager") && p.Spec.NodeName != "" && !slices.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	if len(nodes) == 0 {
		list := &corev1.NodeList{}
		if err := env.Client.List(ctx, list, client.HasLabels{"node-role.kubernetes.io/control-plane"}); err != nil {
			return nil, fmt.Errorf("listing control-plane nodes: %w", err)
		}
		for _, n := range list.Items {
			nodes = append(nodes, n.Name)
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no control-plane node found (no kube-apiserver mirror pod, no node labelled node-role.kubernetes.io/control-plane): use --manifests-dir on the node instead")
	}
	slices.Sort(nodes)
	return nodes, nil
}

// manifestJob runs `patch-manifests` (or its revert) on one node with the
// host's /etc/kubernetes mounted.
func manifestJob(node, action, image string, o Options) *batchv1.Job {
	// The Job waits for its node's kubelet to run each manifest, reading the
	// mirror pods with the node's admin kubeconfig (it has the host's
	// /etc/kubernetes anyway), and rolls back a patch that does not come up.
	args := []string{"patch-manifests", "--manifests-dir", jobMount + "/manifests", "--backup-dir", jobMount + "/yurtdns-backup",
		"--kubeconfig", jobMount + "/admin.conf", "--node-name", node, "--timeout", o.Timeout.String()}
	if action == "restore" {
		args = append(args, "--revert")
	}
	for _, c := range slices.Sorted(maps.Keys(o.TestOnlyExtraFlags)) {
		if action == "patch" {
			args = append(args, "--test-only-extra-flag", c+"="+o.TestOnlyExtraFlags[c])
		}
	}
	// The manifests belong to root; nothing else is needed.
	return hostJob{name: fmt.Sprintf("yurtdns-%s-manifests-%s", action, nodeHash(node)), node: node, action: action,
		container: "patch-manifests", image: image, args: args, hostDir: hostKubernetesDir, mount: jobMount}.job()
}

// runManifestJobs creates a Job per control-plane node and waits for all
// to complete.
func runManifestJobs(ctx context.Context, env *Env, ss *stepState, action string) (Result, error) {
	nodes, err := controlPlaneNodes(ctx, env)
	if err != nil {
		return Result{}, err
	}
	image, err := jobImage(env, ss, action)
	if err != nil {
		return Result{}, err
	}
	if !env.Options.DryRun {
		switch action {
		case "patch":
			// Saved before any Job exists, so a revert after an interruption
			// here knows Jobs may have patched the manifests, and with what image.
			ss.Records[jobsRecordKey] = record{Jobs: &jobsRecord{Nodes: nodes, Image: image}}
			if err := ss.persist(ctx); err != nil {
				return Result{}, err
			}
		case "restore":
			// A patch Job still running after an interrupted install would
			// patch again after its restore Job: let it finish first.
			if err := waitRecordedPatchJobs(ctx, env, ss, nodes, image); err != nil {
				return Result{}, err
			}
		}
	}
	var res Result
	var jobs []*unstructured.Unstructured
	for _, n := range nodes {
		job := toUnstructured(manifestJob(n, action, image, env.Options), "batch/v1", "Job")
		if !env.Options.DryRun {
			if err := deleteFailedJob(ctx, env, job.GetName()); err != nil {
				return Result{}, err
			}
		}
		created, diff, err := ensureCreated(ctx, env, ss, job)
		if err != nil {
			return Result{}, err
		}
		if created {
			res.Changed = true
			res.Diffs = append(res.Diffs, diff)
		}
		jobs = append(jobs, job)
	}
	res.Summary = fmt.Sprintf("%s Job on %s", action, strings.Join(nodes, ", "))
	if env.Options.DryRun {
		return res, nil
	}
	for _, j := range jobs {
		if err := waitJobComplete(ctx, env, j.GetName()); err != nil {
			return Result{}, err
		}
	}
	// Each Job waited for its node's kubelet; the apiserver this client
	// reaches may be a restarted one.
	if err := waitAPIServerReady(ctx, env); err != nil {
		return Result{}, err
	}
	if action == "restore" {
		// Both sets of Jobs have done their work.
		for key, rec := range ss.Records {
			if rec.Created && strings.HasPrefix(key, "Job ") {
				name := key[strings.LastIndex(key, "/")+1:]
				if _, err := deleteCreated(ctx, env, ss, namedObject("batch/v1", "Job", name)); err != nil {
					return Result{}, err
				}
			}
		}
	}
	res.Summary += ": completed"
	return res, nil
}

// deleteFailedJob deletes a Job that a failed install or revert left, so
// that running it again is the retry (the Jobs themselves never retry).
func deleteFailedJob(ctx context.Context, env *Env, name string) error {
	var job batchv1.Job
	err := env.Client.Get(ctx, key(name), &job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if why, err := jobFailure(ctx, env, &job); err != nil || why == "" {
		return err
	}
	if err := env.Client.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the failed Job %s: %w", name, err)
	}
	return waitFor(ctx, env.Options.Timeout, "failed Job "+name+" not gone", func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, key(name), &batchv1.Job{})
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
}

// jobImage is the image of the Jobs: for restore, --sync-image when given,
// else the one install's patch Jobs ran (an offline cluster has that one).
func jobImage(env *Env, ss *stepState, action string) (string, error) {
	if jobs := ss.Records[jobsRecordKey].Jobs; jobs != nil && jobs.Image != "" && action == "restore" && env.Options.SyncImage == "" {
		return jobs.Image, nil
	}
	return syncImage(env)
}

// waitRecordedPatchJobs waits for the patch Jobs install created (and
// recorded) that still exist.
func waitRecordedPatchJobs(ctx context.Context, env *Env, ss *stepState, nodes []string, image string) error {
	for _, n := range nodes {
		job := toUnstructured(manifestJob(n, "patch", image, env.Options), "batch/v1", "Job")
		if rec, ok := ss.Records[objectKey(job)]; !ok || !rec.Created {
			continue
		}
		err := env.Client.Get(ctx, key(job.GetName()), &batchv1.Job{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		// Done or failed, it has stopped writing; the restore Job puts the
		// backups back either way.
		err = waitFor(ctx, jobTimeout(env), "patch Job "+job.GetName()+" from the interrupted install still running", func(ctx context.Context) (bool, string, error) {
			j := &batchv1.Job{}
			if err := env.Client.Get(ctx, key(job.GetName()), j); err != nil {
				return false, "", client.IgnoreNotFound(err)
			}
			why, err := jobFailure(ctx, env, j)
			return jobCondition(j, batchv1.JobComplete) || why != "", "", err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// jobTimeout bounds the wait for a manifest Job: each manifest it patches
// may take a --timeout to come back, and one that does not, another to come
// back from its backup (the Job's own waits, with the same --timeout).
func jobTimeout(env *Env) time.Duration {
	return env.Options.Timeout * time.Duration(2*len(ControlPlanePatches)+1)
}

// waitJobComplete waits for the Job to complete and reports its failure as
// soon as it shows: a Failed (or FailureTarget) condition, a failed pod, or
// a pod that cannot start (its image cannot be pulled, say) — not after the
// whole timeout.
func waitJobComplete(ctx context.Context, env *Env, name string) error {
	return waitFor(ctx, jobTimeout(env), "Job "+name+" not complete", func(ctx context.Context) (bool, string, error) {
		job := &batchv1.Job{}
		if err := env.Client.Get(ctx, key(name), job); err != nil {
			return false, "", err
		}
		if jobCondition(job, batchv1.JobComplete) {
			return true, "", nil
		}
		why, err := jobFailure(ctx, env, job)
		if err != nil || why != "" {
			return false, "", errors.Join(err, fmt.Errorf("Job %s failed: %s (kubectl -n %s logs job/%s)", name, why, tunnelnodes.Namespace, name))
		}
		return false, fmt.Sprintf("%d active, %d failed", job.Status.Active, job.Status.Failed), nil
	})
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == t && c.Status == corev1.ConditionTrue
	})
}

// jobFailure says why the Job failed, or "": its Failed (or FailureTarget)
// condition, a failed pod, or a pod that cannot start — whichever shows
// first (the Jobs never retry: backoffLimit 0).
func jobFailure(ctx context.Context, env *Env, job *batchv1.Job) (string, error) {
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
		if why := podFailure(&p); why != "" {
			return "pod " + p.Name + " " + why, nil
		}
	}
	return "", nil
}

// podFailure says why a pod failed or cannot start, or "".
func podFailure(p *corev1.Pod) string {
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
