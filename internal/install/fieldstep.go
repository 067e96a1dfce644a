package install

import (
	"context"
)

// fieldStep is a step made of one fieldEdit, with an optional action after
// the value changed (install or revert).
func fieldStep(name, what string, f fieldEdit, after func(context.Context, *Env) error) Step {
	run := func(ctx context.Context, env *Env, changed bool) error {
		if !changed || env.Options.DryRun || after == nil {
			return nil
		}
		return after(ctx, env)
	}
	return Step{
		Name: name,
		Install: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			// A record of the value without the step applied: an earlier
			// install wrote it (or was about to) and was interrupted, maybe
			// before the action after the write, which must run now.
			_, interrupted := ss.Records[f.key]
			interrupted = interrupted && !ss.Applied
			changed, diff, err := f.install(ctx, env, ss)
			if err != nil {
				return Result{}, err
			}
			if err := run(ctx, env, changed || interrupted); err != nil {
				return Result{}, err
			}
			switch {
			case changed:
				return Result{Changed: true, Summary: what, Diffs: []string{diff}}, nil
			case interrupted && after != nil:
				return Result{Changed: true, Summary: what + " (completing an interrupted install)"}, nil
			}
			return Result{Summary: "already applied"}, nil
		},
		Revert: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			outcome, diff, err := f.revert(ctx, env, ss)
			if err != nil {
				return Result{}, err
			}
			// The original value back after a revert began restoring it: that
			// revert was interrupted, maybe before the action after the
			// write, which must run now.
			interrupted := outcome == stillOriginal && ss.Records[f.key].Restoring
			if err := run(ctx, env, outcome == restored || interrupted); err != nil {
				return Result{}, err
			}
			switch {
			case interrupted && after != nil:
				return Result{Changed: true, Summary: "restored " + f.key + " (completing an interrupted revert)"}, nil
			case outcome == changedSince:
				return Result{Summary: f.leftAsIs()}, nil
			case outcome != restored:
				return Result{Summary: "nothing to restore"}, nil
			}
			res := Result{Changed: true, Summary: "restored " + f.key}
			if diff != "" {
				res.Diffs = []string{diff}
			}
			return res, nil
		},
		Status: f.status,
	}
}
