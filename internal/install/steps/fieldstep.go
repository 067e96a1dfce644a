package steps

import (
	"context"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
)

// fieldStep is a step made of one kube.FieldEdit, with an optional action after
// the value changed (install or revert).
func fieldStep(name, what string, f kube.FieldEdit, after func(context.Context, *engine.Env) error) engine.Step {
	run := func(ctx context.Context, env *engine.Env, changed bool) error {
		if !changed || env.Options.DryRun || after == nil {
			return nil
		}
		return after(ctx, env)
	}
	return engine.Step{
		Name: name,
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			// A record of the value without the step applied: an earlier
			// install wrote it (or was about to) and was interrupted, maybe
			// before the action after the write, which must run now.
			_, interrupted := ss.Records[f.Key]
			interrupted = interrupted && !ss.Applied
			changed, diff, err := f.Install(ctx, env, ss)
			if err != nil {
				return engine.Result{}, err
			}
			if err := run(ctx, env, changed || interrupted); err != nil {
				return engine.Result{}, err
			}
			switch {
			case changed:
				return engine.Result{Changed: true, Summary: what, Diffs: []string{diff}}, nil
			case interrupted && after != nil:
				return engine.Result{Changed: true, Summary: what + " (completing an interrupted install)"}, nil
			}
			return engine.Result{Summary: "already applied"}, nil
		},
		Revert: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			outcome, diff, err := f.Revert(ctx, env, ss)
			if err != nil {
				return engine.Result{}, err
			}
			// The original value back after a revert began restoring it: that
			// revert was interrupted, maybe before the action after the
			// write, which must run now.
			interrupted := outcome == kube.StillOriginal && ss.Records[f.Key].Restoring
			if err := run(ctx, env, outcome == kube.Restored || interrupted); err != nil {
				return engine.Result{}, err
			}
			switch {
			case interrupted && after != nil:
				return engine.Result{Changed: true, Summary: "restored " + f.Key + " (completing an interrupted revert)"}, nil
			case outcome == kube.ChangedSince:
				return engine.Result{Summary: f.LeftAsIs()}, nil
			case outcome != kube.Restored:
				return engine.Result{Summary: "nothing to restore"}, nil
			}
			res := engine.Result{Changed: true, Summary: "restored " + f.Key}
			if diff != "" {
				res.Diffs = []string{diff}
			}
			return res, nil
		},
		Status: f.Status,
	}
}

// skipWhere makes install skip step where skipReason gives a reason, and
// status say why for a step install did not apply ("skipped by install: "
// rather than the read's error). skipReason sees the step's state so it can
// let install finish what an interrupted install began.
func skipWhere(step engine.Step, skipReason func(context.Context, *engine.Env, *engine.StepState) (string, error)) engine.Step {
	install, status := step.Install, step.Status
	step.Install = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
		if reason, err := skipReason(ctx, env, ss); err != nil || reason != "" {
			return engine.Result{Skipped: true, Summary: "skipped: " + reason}, err
		}
		return install(ctx, env, ss)
	}
	step.Status = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
		s, detail, err := status(ctx, env, ss)
		if err != nil || s != engine.NotApplied || ss.Applied {
			return s, detail, err
		}
		if reason, err := skipReason(ctx, env, ss); err == nil && reason != "" {
			detail = "skipped by install: " + reason
		}
		return s, detail, nil
	}
	return step
}
