package steps

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/staticpod"
)

// The control-plane step without --manifests-dir or --control-plane-jobs:
// skipped, and recorded so, with what applies it.
const (
	noManifestsDir    = "skipped: neither --manifests-dir nor --control-plane-jobs given"
	applyControlPlane = "install --control-plane-jobs (or --manifests-dir on a control-plane node, " +
		"or tunnel-nodes-sync patch-manifests on each control-plane node)"
)

// controlPlaneStep edits the kube-controller-manager and kube-apiserver
// static pod manifests, locally (--manifests-dir) or with a Job on each
// control-plane node (--control-plane-jobs), and makes the edits survive
// kubeadm rendering the manifests again: the flags go into kubeadm-config's
// ClusterConfiguration, dnsPolicy into a kubeadm patch beside the manifests.
func controlPlaneStep() engine.Step {
	return engine.Step{
		Name: "control-plane",
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			if !env.Options.ControlPlaneJobs && env.Options.ManifestsDir == "" {
				return engine.Result{Skipped: true, Summary: noManifestsDir + ": " + applyControlPlane + " applies it", ApplyWith: applyControlPlane}, nil
			}
			keep, why, err := keepNodeLifecycle(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			cfg, err := installKubeadmConfig(ctx, env, ss, keep)
			if err != nil {
				return engine.Result{}, err
			}
			var res engine.Result
			if env.Options.ControlPlaneJobs {
				res, err = installByJobs(ctx, env, ss, keep)
				if keep && err == nil && res.Changed {
					res.Summary += "; " + leftAlone(why)
				}
			} else {
				res, err = installLocally(ctx, env, ss, keep, why)
			}
			if keep && err == nil && !res.Changed {
				res.Summary += " (" + leftAlone(why) + ")"
			}
			if err != nil {
				return engine.Result{}, err
			}
			if cfg.Changed {
				res.Changed = true
				res.Diffs = append(cfg.Diffs, res.Diffs...)
				if res.Summary == "already applied" {
					res.Summary = cfg.Summary
				} else {
					res.Summary = cfg.Summary + "; " + res.Summary
				}
			}
			return res, nil
		},
		Revert: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			res, err := revertManifests(ctx, env, ss)
			if err != nil {
				return engine.Result{}, err
			}
			edit := kubeadmConfigEdit(false)
			outcome, diff, err := edit.Revert(ctx, env, ss)
			if err != nil {
				return engine.Result{}, err
			}
			switch outcome {
			case kube.Restored:
				res.Changed = true
				res.Summary = "restored " + edit.Key + "; " + res.Summary
				if diff != "" {
					res.Diffs = append(res.Diffs, diff)
				}
			case kube.ChangedSince:
				res.Summary += "; " + edit.LeftAsIs()
			}
			return res, nil
		},
		Status: controlPlaneStatus,
	}
}

// installKubeadmConfig puts install's flags into kubeadm-config, where
// kubeadm made the cluster.
func installKubeadmConfig(ctx context.Context, env *engine.Env, ss *engine.StepState, keep bool) (engine.Result, error) {
	if ok, err := hasKubeadmConfig(ctx, env); err != nil || !ok {
		return engine.Result{}, err
	}
	edit := kubeadmConfigEdit(keep)
	changed, diff, err := edit.Install(ctx, env, ss)
	if err != nil || !changed {
		return engine.Result{}, err
	}
	return engine.Result{Changed: true, Summary: edit.Key + " carries the flags (kubeadm renders them on upgrade)", Diffs: []string{diff}}, nil
}

// installByJobs patches every control-plane node with a Job, unless each
// already runs install's edits: a node kubeadm upgraded since the first
// install gets a new Job (the old one stays complete).
func installByJobs(ctx context.Context, env *engine.Env, ss *engine.StepState, keep bool) (engine.Result, error) {
	missing, err := liveControlPlane(ctx, env, keep)
	if err != nil {
		return engine.Result{}, err
	}
	jobs := ss.Records[engine.JobsRecordKey].Jobs
	// An install before v0.1.0 wrote no kubeadm patch: the Jobs write it
	// (the manifests, already patched, stay as they are).
	noPatch := jobs != nil && jobs.KubeadmPatchesDir == ""
	if len(missing) == 0 && jobs != nil && !noPatch {
		return engine.Result{Summary: "already applied"}, nil
	}
	res, err := runManifestJobs(ctx, env, ss, "patch", keep)
	switch {
	case err != nil:
	case ss.Applied && len(missing) > 0:
		res.Summary = "applied again, " + strings.Join(missing, "; ") + ": " + res.Summary
	case noPatch:
		res.Summary = "the kubeadm patch an install before v0.1.0 did not write: " + res.Summary
	}
	return res, err
}

// installLocally patches --manifests-dir on this node; why says why
// kube-controller-manager is kept.
func installLocally(ctx context.Context, env *engine.Env, ss *engine.StepState, keep bool, why string) (engine.Result, error) {
	dir, patches := env.Options.ManifestsDir, kubeadmPatchesDir(env.Options.KubeadmPatchesDir, env.Options.ManifestsDir)
	plan, err := staticpod.PatchManifests(ctx, dir, env.Options.BackupDir, staticpod.ManifestOptions{DryRun: true,
		TestOnlyExtraFlags: env.Options.TestOnlyExtraFlags, KeepNodeLifecycle: keep, KubeadmPatchesDir: patches})
	if err != nil {
		return engine.Result{}, err
	}
	var res engine.Result
	for _, c := range plan {
		if c.Changed {
			res.Changed = true
			res.Diffs = append(res.Diffs, c.Diff)
		}
	}
	if !res.Changed {
		return engine.Result{Summary: "already applied"}, nil
	}
	res.Summary = "kube-controller-manager --controllers gains -nodelifecycle; kube-apiserver prefers Hostname and resolves it through cluster DNS"
	if keep {
		res.Summary = "kube-apiserver prefers Hostname and resolves it through cluster DNS; " + leftAlone(why)
	}
	if env.Options.DryRun {
		return res, nil
	}
	ss.Records[engine.ManifestsRecordKey] = engine.Record{Manifests: &engine.ManifestsRecord{Dir: dir, BackupDir: env.Options.BackupDir, KubeadmPatchesDir: patches,
		Node: env.Options.NodeName}}
	if err := ss.Persist(ctx); err != nil {
		return engine.Result{}, err
	}
	live := manifestOptions(env)
	live.KeepNodeLifecycle, live.KubeadmPatchesDir = keep, patches
	done, err := staticpod.PatchManifests(ctx, dir, env.Options.BackupDir, live)
	for _, c := range done {
		if c.Note != "" {
			res.Summary += "\n    " + filepath.Base(c.Path) + ": " + c.Note
		}
	}
	if err != nil {
		return engine.Result{}, err
	}
	return res, kube.WaitAPIServerReady(ctx, env)
}

// revertManifests restores the manifests (and takes the kubeadm patch out)
// where install patched them.
func revertManifests(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
	if ss.Records[engine.JobsRecordKey].Jobs != nil {
		return runManifestJobs(ctx, env, ss, "restore", false)
	}
	m := ss.Records[engine.ManifestsRecordKey].Manifests
	if m == nil {
		return engine.Result{Summary: "nothing to restore"}, nil
	}
	o := manifestOptions(env)
	o.KubeadmPatchesDir = m.KubeadmPatchesDir
	if m.Node != "" {
		o.Kubelet.Node = m.Node
	}
	restored, kept, err := staticpod.RestoreManifests(ctx, m.Dir, m.BackupDir, o)
	if err != nil {
		return engine.Result{}, err
	}
	if len(restored) > 0 && !env.Options.DryRun {
		if err := kube.WaitAPIServerReady(ctx, env); err != nil {
			return engine.Result{}, err
		}
	}
	summary := "restored " + strings.Join(restored, ", ")
	if len(restored) == 0 {
		summary = "nothing to restore"
	}
	if len(kept) > 0 {
		summary += "; changed since install, left as they are: " + strings.Join(kept, ", ")
	}
	return engine.Result{Changed: len(restored) > 0, Summary: summary}, nil
}

// controlPlaneStatus: applied when kubeadm-config carries install's flags
// and the control plane runs its edits: the mirror pods say what each
// kubelet runs (after Jobs, or where no manifests directory is given), the
// files of --manifests-dir otherwise.
func controlPlaneStatus(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
	keep, _, err := keepNodeLifecycle(ctx, env)
	if err != nil {
		return "", "", err
	}
	var missing []string
	if m, err := kubeadmConfigMissing(ctx, env, keep); err != nil {
		return "", "", err
	} else if m != "" {
		missing = append(missing, m)
	}
	dir := env.Options.ManifestsDir
	if m := ss.Records[engine.ManifestsRecordKey].Manifests; m != nil && dir == "" {
		dir = m.Dir
	}
	if ss.Records[engine.JobsRecordKey].Jobs != nil || dir == "" {
		live, err := liveControlPlane(ctx, env, keep)
		if err != nil && ss.Applied {
			return engine.Drifted, err.Error(), nil
		}
		if err != nil {
			return engine.NotApplied, err.Error(), nil
		}
		missing = append(missing, live...)
	} else {
		plan, err := staticpod.PatchManifests(ctx, dir, "", staticpod.ManifestOptions{DryRun: true, KeepNodeLifecycle: keep})
		if err != nil {
			return engine.Drifted, err.Error(), nil
		}
		for _, c := range plan {
			if c.Changed {
				missing = append(missing, c.Path+" lacks install's edits")
			}
		}
	}
	switch {
	case len(missing) == 0:
		return engine.Applied, "", nil
	case ss.Applied:
		return engine.Drifted, undoneByKubeadm + ": " + strings.Join(missing, "; "), nil
	}
	return engine.NotApplied, strings.Join(missing, "; "), nil
}

// kubeadmPatchesDir is where install's kubeadm patch goes for the manifests
// in manifestsDir: --kubeadm-patches-dir, else "patches" beside them
// (/etc/kubernetes/patches for kubeadm's /etc/kubernetes/manifests).
func kubeadmPatchesDir(flag, manifestsDir string) string {
	if flag != "" {
		return flag
	}
	return filepath.Join(filepath.Dir(filepath.Clean(manifestsDir)), "patches")
}

// manifestOptions writes the control-plane manifests live: each waited for.
func manifestOptions(env *engine.Env) staticpod.ManifestOptions {
	return staticpod.ManifestOptions{DryRun: env.Options.DryRun, TestOnlyExtraFlags: env.Options.TestOnlyExtraFlags,
		Kubelet: &staticpod.KubeletWait{Client: env.Client, Node: env.Options.NodeName, Timeout: env.Options.Timeout}}
}
