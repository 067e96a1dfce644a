package steps

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The control-plane step with --control-plane-jobs: a Job on each
// control-plane node runs `patch-manifests` (or its revert) there, one node
// at a time.

// On a control-plane node the Jobs mount the host's /etc/kubernetes, so the
// backups sit next to the manifests directory, on the same filesystem.
const (
	hostKubernetesDir = "/etc/kubernetes"
	jobMount          = "/host/etc/kubernetes"
)

// manifestJob runs `patch-manifests` (or its revert) on one node with the
// host's /etc/kubernetes mounted.
func manifestJob(node, action, image, patchesDir string, keepNodeLifecycle bool, o engine.Options) *batchv1.Job {
	// The Job waits for its node's kubelet to run each manifest, reading the
	// mirror pods with the node's admin kubeconfig (it has the host's
	// /etc/kubernetes anyway), and rolls back a patch that does not come up.
	args := []string{"patch-manifests", "--manifests-dir", jobMount + "/manifests", "--backup-dir", jobMount + "/yurtdns-backup",
		"--kubeadm-patches-dir", jobMount + strings.TrimPrefix(patchesDir, hostKubernetesDir),
		"--kubeconfig", jobMount + "/admin.conf", "--node-name", node, "--timeout", o.Timeout.String()}
	// install decided: the Job is told, never left to its default (auto).
	switch {
	case action == "restore":
		args = append(args, "--revert")
	case keepNodeLifecycle:
		args = append(args, "--kcm-nodelifecycle", engine.NodeLifecycleKeep)
	default:
		args = append(args, "--kcm-nodelifecycle", engine.NodeLifecycleDisable)
	}
	for _, c := range slices.Sorted(maps.Keys(o.TestOnlyExtraFlags)) {
		if action == "patch" {
			args = append(args, "--test-only-extra-flag", c+"="+o.TestOnlyExtraFlags[c])
		}
	}
	// The manifests belong to root; nothing else is needed.
	return kube.HostJob{Name: fmt.Sprintf("yurtdns-%s-manifests-%s", action, kube.NodeHash(node)), Node: node, Action: action,
		Container: "patch-manifests", Image: image, Args: args, HostDir: hostKubernetesDir, Mount: jobMount}.Job()
}

// runManifestJobs runs the Job of each control-plane node, one node at a
// time in ControlPlaneNodes' order: the next node's Job is created once the
// last one completed and its node's kube-apiserver serves and etcd is
// healthy again, so that on several control-plane nodes the others keep
// the API up. A node that fails stops it there, the later ones untouched.
func runManifestJobs(ctx context.Context, env *engine.Env, ss *engine.StepState, action string, keepNodeLifecycle bool) (engine.Result, error) {
	nodes, err := kube.ControlPlaneNodes(ctx, env)
	if err != nil {
		return engine.Result{}, err
	}
	image, err := jobImage(env, ss, action)
	if err != nil {
		return engine.Result{}, err
	}
	patchesDir, err := jobPatchesDir(env, ss, action)
	if err != nil {
		return engine.Result{}, err
	}
	if !env.Options.DryRun {
		switch action {
		case "patch":
			// Saved before any Job exists, so a revert after an interruption
			// here knows Jobs may have patched the manifests, and with what
			// image, and where the kubeadm patch went.
			ss.Records[engine.JobsRecordKey] = engine.Record{Jobs: &engine.JobsRecord{Nodes: nodes, Image: image, KubeadmPatchesDir: patchesDir}}
			if err := ss.Persist(ctx); err != nil {
				return engine.Result{}, err
			}
		case "restore":
			// A patch Job still running after an interrupted install would
			// patch again after its restore Job: let it finish first.
			if err := waitRecordedPatchJobs(ctx, env, ss, nodes, image, patchesDir); err != nil {
				return engine.Result{}, err
			}
		}
	}
	var res engine.Result
	var done []string
	for i, n := range nodes {
		job := kube.ToUnstructured(manifestJob(n, action, image, patchesDir, keepNodeLifecycle, env.Options), "batch/v1", "Job")
		if env.Options.DryRun {
			created, diff, err := kube.EnsureCreated(ctx, env, ss, job)
			if err != nil {
				return engine.Result{}, err
			}
			if created {
				res.Changed = true
				res.Diffs = append(res.Diffs, diff)
			}
			continue
		}
		ss.Doing(fmt.Sprintf("%s Job on %s (node %d of %d)", action, n, i+1, len(nodes)))
		took, created, diff, err := runManifestJob(ctx, env, ss, n, job)
		if created {
			res.Changed = true
			res.Diffs = append(res.Diffs, diff)
		}
		if err != nil {
			return engine.Result{}, nodeFailed(action, n, err, done, nodes[i+1:])
		}
		done = append(done, n+" ("+took+")")
	}
	if env.Options.DryRun {
		res.Summary = fmt.Sprintf("%s Job on %s, one node at a time", action, strings.Join(nodes, ", "))
		return res, nil
	}
	res.Summary = fmt.Sprintf("%s Job on %s", action, strings.Join(done, ", "))
	// Each node's apiserver served; the one this client reaches may be
	// another (a load balancer's pick), or restarted since.
	if err := kube.WaitAPIServerReady(ctx, env); err != nil {
		return engine.Result{}, err
	}
	if action == "restore" {
		// Both sets of Jobs have done their work.
		for key, rec := range ss.Records {
			if rec.Created && strings.HasPrefix(key, "Job ") {
				name := key[strings.LastIndex(key, "/")+1:]
				if _, err := kube.DeleteCreated(ctx, env, ss, kube.NamedObject("batch/v1", "Job", name)); err != nil {
					return engine.Result{}, err
				}
			}
		}
	}
	res.Summary += ": completed"
	return res, nil
}

// runManifestJob runs one node's Job and waits for the node to serve again;
// took says what was waited for and how long it all took
// ("kube-apiserver serving, etcd healthy after 41s").
func runManifestJob(ctx context.Context, env *engine.Env, ss *engine.StepState, node string, job *unstructured.Unstructured) (took string, created bool, diff string, err error) {
	start := time.Now()
	// Read before the Job restarts anything: the mirror pods there now.
	health, err := kube.ReadControlPlaneNodeHealth(ctx, env, node)
	if err != nil {
		return "", false, "", err
	}
	// One that ran before (failed, or done before a kubeadm upgrade undid
	// its work) runs anew.
	if err := kube.DeleteFinishedJob(ctx, env, job.GetName()); err != nil {
		return "", false, "", err
	}
	created, diff, err = kube.EnsureCreated(ctx, env, ss, job)
	if err != nil {
		return "", false, "", err
	}
	if err := kube.WaitJobComplete(ctx, env, job.GetName()); err != nil {
		return "", created, diff, err
	}
	if len(health.MirrorPods) > 0 {
		ss.Doing(fmt.Sprintf("Job %s complete; waiting for %s to be Ready", job.GetName(), strings.Join(health.MirrorPods, " and ")))
	}
	if err := health.Wait(ctx, env); err != nil {
		return "", created, diff, err
	}
	return health.After(time.Since(start)), created, diff, nil
}

// nodeFailed is the error of a node whose Job or restart failed: which node,
// and what that leaves on the others.
func nodeFailed(action, node string, err error, done, untouched []string) error {
	var left string
	if len(done) > 0 {
		left += "; done on " + strings.Join(done, ", ")
	}
	if len(untouched) > 0 {
		left += "; not started on " + strings.Join(untouched, ", ")
	}
	return fmt.Errorf("%s Job on %s: %w%s", action, node, err, left)
}

// jobImage is the image of the Jobs: for restore, --sync-image when given,
// else the one install's patch Jobs ran (an offline cluster has that one).
func jobImage(env *engine.Env, ss *engine.StepState, action string) (string, error) {
	if jobs := ss.Records[engine.JobsRecordKey].Jobs; jobs != nil && jobs.Image != "" && action == "restore" && env.Options.SyncImage == "" {
		return jobs.Image, nil
	}
	return kube.SyncImage(env)
}

// jobPatchesDir is the host directory the Jobs put install's kubeadm patch
// in: for restore, the one install's Jobs used; it must lie under the
// /etc/kubernetes they mount.
func jobPatchesDir(env *engine.Env, ss *engine.StepState, action string) (string, error) {
	if jobs := ss.Records[engine.JobsRecordKey].Jobs; jobs != nil && jobs.KubeadmPatchesDir != "" && action == "restore" {
		return jobs.KubeadmPatchesDir, nil
	}
	dir := filepath.Clean(kubeadmPatchesDir(env.Options.KubeadmPatchesDir, hostKubernetesDir+"/manifests"))
	if !strings.HasPrefix(dir, hostKubernetesDir+"/") {
		return "", fmt.Errorf("--kubeadm-patches-dir %s: with --control-plane-jobs it must lie under %s, which the Jobs mount", dir, hostKubernetesDir)
	}
	return dir, nil
}

// waitRecordedPatchJobs waits for the patch Jobs install created (and
// recorded) that still exist.
func waitRecordedPatchJobs(ctx context.Context, env *engine.Env, ss *engine.StepState, nodes []string, image, patchesDir string) error {
	for _, n := range nodes {
		job := kube.ToUnstructured(manifestJob(n, "patch", image, patchesDir, false, env.Options), "batch/v1", "Job")
		if rec, ok := ss.Records[kube.ObjectKey(job)]; !ok || !rec.Created {
			continue
		}
		err := env.Client.Get(ctx, kube.Key(job.GetName()), &batchv1.Job{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		// Done or failed, it has stopped writing; the restore Job puts the
		// backups back either way.
		err = kubewait.For(ctx, kube.JobTimeout(env), "patch Job "+job.GetName()+" from the interrupted install still running", func(ctx context.Context) (bool, string, error) {
			j := &batchv1.Job{}
			if err := env.Client.Get(ctx, kube.Key(job.GetName()), j); err != nil {
				return false, "", client.IgnoreNotFound(err)
			}
			why, err := kube.JobFailure(ctx, env, j)
			return kube.JobCondition(j, batchv1.JobComplete) || why != "", "", err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
