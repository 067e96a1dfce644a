package steps

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/staticpod"
)

// noManifestsDir explains a skipped control-plane step.
const noManifestsDir = "skipped: neither --manifests-dir nor --control-plane-jobs given (or run `tunnel-nodes-sync patch-manifests` on each control-plane node)"

// controlPlaneStep edits the kube-controller-manager and kube-apiserver
// static pod manifests: locally (--manifests-dir) or with a Job on each
// control-plane node (--control-plane-jobs).
func controlPlaneStep() engine.Step {
	return engine.Step{
		Name: "control-plane",
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			if !env.Options.ControlPlaneJobs && env.Options.ManifestsDir == "" {
				return engine.Result{Summary: noManifestsDir}, nil
			}
			keep, why, err := keepNodeLifecycle(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			if env.Options.ControlPlaneJobs {
				res, err := runManifestJobs(ctx, env, ss, "patch", keep)
				if keep && err == nil {
					res.Summary += "; " + leftAlone(why)
				}
				return res, err
			}
			plan, err := staticpod.PatchManifests(ctx, env.Options.ManifestsDir, env.Options.BackupDir,
				staticpod.ManifestOptions{DryRun: true, TestOnlyExtraFlags: env.Options.TestOnlyExtraFlags, KeepNodeLifecycle: keep})
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
				res.Summary = "already applied"
				if keep {
					res.Summary += " (" + leftAlone(why) + ")"
				}
				return res, nil
			}
			res.Summary = "kube-controller-manager --controllers gains -nodelifecycle; kube-apiserver prefers Hostname and resolves it through cluster DNS"
			if keep {
				res.Summary = "kube-apiserver prefers Hostname and resolves it through cluster DNS; " + leftAlone(why)
			}
			if env.Options.DryRun {
				return res, nil
			}
			ss.Records[engine.ManifestsRecordKey] = engine.Record{Manifests: &engine.ManifestsRecord{Dir: env.Options.ManifestsDir, BackupDir: env.Options.BackupDir}}
			if err := ss.Persist(ctx); err != nil {
				return engine.Result{}, err
			}
			live := manifestOptions(env)
			live.KeepNodeLifecycle = keep
			done, err := staticpod.PatchManifests(ctx, env.Options.ManifestsDir, env.Options.BackupDir, live)
			for _, c := range done {
				if c.Note != "" {
					res.Summary += "\n    " + filepath.Base(c.Path) + ": " + c.Note
				}
			}
			if err != nil {
				return engine.Result{}, err
			}
			return res, kube.WaitAPIServerReady(ctx, env)
		},
		Revert: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			if ss.Records[engine.JobsRecordKey].Jobs != nil {
				return runManifestJobs(ctx, env, ss, "restore", false)
			}
			m := ss.Records[engine.ManifestsRecordKey].Manifests
			if m == nil {
				return engine.Result{Summary: "nothing to restore"}, nil
			}
			restored, kept, err := staticpod.RestoreManifests(ctx, m.Dir, m.BackupDir, manifestOptions(env))
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
		},
		Status: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
			if ss.Records[engine.JobsRecordKey].Jobs != nil {
				return engine.Applied, "patched by Jobs on the control-plane nodes (check each node with `patch-manifests --dry-run`)", nil
			}
			dir := env.Options.ManifestsDir
			if m := ss.Records[engine.ManifestsRecordKey].Manifests; m != nil && dir == "" {
				dir = m.Dir
			}
			if dir == "" {
				return engine.NotApplied, "no --manifests-dir to check", nil
			}
			keep, _, err := keepNodeLifecycle(ctx, env)
			if err != nil {
				return "", "", err
			}
			plan, err := staticpod.PatchManifests(ctx, dir, "", staticpod.ManifestOptions{DryRun: true, KeepNodeLifecycle: keep})
			if err != nil {
				return engine.Drifted, err.Error(), nil
			}
			for _, c := range plan {
				if c.Changed {
					if ss.Applied {
						return engine.Drifted, c.Path + " changed after install", nil
					}
					return engine.NotApplied, "", nil
				}
			}
			return engine.Applied, "", nil
		},
	}
}

// manifestOptions writes the control-plane manifests live: each waited for.
func manifestOptions(env *engine.Env) staticpod.ManifestOptions {
	return staticpod.ManifestOptions{DryRun: env.Options.DryRun, TestOnlyExtraFlags: env.Options.TestOnlyExtraFlags,
		Kubelet: &staticpod.KubeletWait{Client: env.Client, Node: env.Options.NodeName, Timeout: env.Options.Timeout}}
}
