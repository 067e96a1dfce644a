package install

import (
	"context"
	"path/filepath"
	"strings"
)

// noManifestsDir explains a skipped control-plane step.
const noManifestsDir = "skipped: neither --manifests-dir nor --control-plane-jobs given (or run `tunnel-nodes-sync patch-manifests` on each control-plane node)"

// controlPlaneStep edits the kube-controller-manager and kube-apiserver
// static pod manifests: locally (--manifests-dir) or with a Job on each
// control-plane node (--control-plane-jobs).
func controlPlaneStep() Step {
	return Step{
		Name: "control-plane",
		Install: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			switch {
			case env.Options.ControlPlaneJobs:
				return runManifestJobs(ctx, env, ss, "patch")
			case env.Options.ManifestsDir == "":
				return Result{Summary: noManifestsDir}, nil
			}
			plan, err := PatchManifests(ctx, env.Options.ManifestsDir, env.Options.BackupDir,
				ManifestOptions{DryRun: true, TestOnlyExtraFlags: env.Options.TestOnlyExtraFlags})
			if err != nil {
				return Result{}, err
			}
			var res Result
			for _, c := range plan {
				if c.Changed {
					res.Changed = true
					res.Diffs = append(res.Diffs, c.Diff)
				}
			}
			if !res.Changed {
				res.Summary = "already applied"
				return res, nil
			}
			res.Summary = "kube-controller-manager --controllers gains -nodelifecycle; kube-apiserver prefers Hostname and resolves it through cluster DNS"
			if env.Options.DryRun {
				return res, nil
			}
			ss.Records[manifestsRecordKey] = record{Manifests: &manifestsRecord{Dir: env.Options.ManifestsDir, BackupDir: env.Options.BackupDir}}
			if err := ss.persist(ctx); err != nil {
				return Result{}, err
			}
			done, err := PatchManifests(ctx, env.Options.ManifestsDir, env.Options.BackupDir, manifestOptions(env))
			for _, c := range done {
				if c.Note != "" {
					res.Summary += "\n    " + filepath.Base(c.Path) + ": " + c.Note
				}
			}
			if err != nil {
				return Result{}, err
			}
			return res, waitAPIServerReady(ctx, env)
		},
		Revert: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			if ss.Records[jobsRecordKey].Jobs != nil {
				return runManifestJobs(ctx, env, ss, "restore")
			}
			m := ss.Records[manifestsRecordKey].Manifests
			if m == nil {
				return Result{Summary: "nothing to restore"}, nil
			}
			restored, kept, err := RestoreManifests(ctx, m.Dir, m.BackupDir, manifestOptions(env))
			if err != nil {
				return Result{}, err
			}
			if len(restored) > 0 && !env.Options.DryRun {
				if err := waitAPIServerReady(ctx, env); err != nil {
					return Result{}, err
				}
			}
			summary := "restored " + strings.Join(restored, ", ")
			if len(restored) == 0 {
				summary = "nothing to restore"
			}
			if len(kept) > 0 {
				summary += "; changed since install, left as they are: " + strings.Join(kept, ", ")
			}
			return Result{Changed: len(restored) > 0, Summary: summary}, nil
		},
		Status: func(ctx context.Context, env *Env, ss *stepState) (StepStatus, string, error) {
			if ss.Records[jobsRecordKey].Jobs != nil {
				return Applied, "patched by Jobs on the control-plane nodes (check each node with `patch-manifests --dry-run`)", nil
			}
			dir := env.Options.ManifestsDir
			if m := ss.Records[manifestsRecordKey].Manifests; m != nil && dir == "" {
				dir = m.Dir
			}
			if dir == "" {
				return NotApplied, "no --manifests-dir to check", nil
			}
			plan, err := PatchManifests(ctx, dir, "", ManifestOptions{DryRun: true})
			if err != nil {
				return Drifted, err.Error(), nil
			}
			for _, c := range plan {
				if c.Changed {
					if ss.Applied {
						return Drifted, c.Path + " changed after install", nil
					}
					return NotApplied, "", nil
				}
			}
			return Applied, "", nil
		},
	}
}

// manifestOptions writes the control-plane manifests live: each waited for.
func manifestOptions(env *Env) ManifestOptions {
	return ManifestOptions{DryRun: env.Options.DryRun, TestOnlyExtraFlags: env.Options.TestOnlyExtraFlags,
		Kubelet: &KubeletWait{Client: env.Client, Node: env.Options.NodeName, Timeout: env.Options.Timeout}}
}
