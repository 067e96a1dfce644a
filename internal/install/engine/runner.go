package engine

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/yurtdns/yurtdns/internal/version"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Runner runs one layout's steps, as kubeadm's workflow runs its phases:
// install in order, revert backwards, status for each.
type Runner struct {
	// Steps are the layout's steps, then the opt-in ones.
	Steps []Step
	// Preflight refuses a cluster the layout does not fit, before install
	// changes anything.
	Preflight func(context.Context, *Env, io.Writer) error
	// Owner names the other layout whose steps include step, or "": a state
	// that holds such a step was written by an install of that layout.
	Owner func(step string) string
}

// Install runs the steps in order, printing a line per step. A step that
// fails stops the run; what earlier steps did is recorded, so running
// install again carries on from there.
func (r Runner) Install(ctx context.Context, env *Env, out io.Writer) error {
	st, err := r.loadState(ctx, env)
	if err != nil {
		return err
	}
	if version.Compare(st.version, version.Version) > 0 && !env.Options.Force {
		return fmt.Errorf("the cluster runs yurtdns %s, newer than this binary (%s): install with the %s binary, "+
			"or give --force to put this older version's objects over it", st.version, version.Version, st.version)
	}
	if err := r.Preflight(ctx, env, out); err != nil {
		return err
	}
	for _, step := range r.Steps {
		if step.Preflight == nil || slices.Contains(env.Options.Skip, step.Name) || (step.Enabled != nil && !step.Enabled(env.Options)) {
			continue
		}
		if err := step.Preflight(ctx, env); err != nil {
			return fmt.Errorf("%s: %w", step.Name, err)
		}
	}
	for _, step := range r.Steps {
		ss := st.step(step.Name)
		install := step.Install
		byFlag := slices.Contains(env.Options.Skip, step.Name)
		switch {
		case byFlag:
			install = skippedByFlag(step.Name)
		case step.Enabled != nil && !step.Enabled(env.Options):
			install = notRequested(step.OptIn)
		}
		res, err := runStep(ctx, env, out, step.Name, install, ss, "step")
		if err != nil {
			return err
		}
		if env.Options.DryRun {
			continue
		}
		switch {
		case !res.Skipped:
			ss.Applied, ss.Skipped = true, ""
		case ss.Applied && (byFlag || len(ss.Records) > 0 || res.ApplyWith == ""):
			continue // applied earlier: revert undoes it, status checks it
		case !ss.Applied && ss.Skipped == res.ApplyWith:
			continue // as recorded
		default:
			// What applies it now ("" for a step not for this cluster). One
			// recorded applied with nothing it changed is an older install's
			// skip taken for applied (the bare control-plane step).
			ss.Applied, ss.Skipped = false, res.ApplyWith
		}
		if err := st.persist(ctx); err != nil {
			return err
		}
	}
	if env.Options.DryRun {
		return nil
	}
	// Every step is at this version now.
	st.version = version.Version
	return st.persist(ctx)
}

// notRequested is the install of an opt-in step its flag did not ask for.
func notRequested(flag string) func(context.Context, *Env, *StepState) (Result, error) {
	return func(_ context.Context, _ *Env, ss *StepState) (Result, error) {
		if ss.Applied {
			return Result{Skipped: true, Summary: "applied earlier, left as it is (without " + flag + "; revert removes it)"}, nil
		}
		return Result{Skipped: true, Summary: "not requested (" + flag + ")"}, nil
	}
}

// skippedByFlag is the install of a step --skip names.
func skippedByFlag(name string) func(context.Context, *Env, *StepState) (Result, error) {
	return func(context.Context, *Env, *StepState) (Result, error) {
		return Result{Skipped: true, Summary: "skipped (--skip)", ApplyWith: "install without --skip " + name}, nil
	}
}

// runStep runs one step's install or revert and prints its line, and a line
// every progressInterval while it runs; what names the run in an error
// ("step", "reverting step").
func runStep(ctx context.Context, env *Env, out io.Writer, name string, run func(context.Context, *Env, *StepState) (Result, error),
	ss *StepState, what string) (Result, error) {
	var mu sync.Mutex
	var doing string
	ss.doing = func(what string) {
		mu.Lock()
		defer mu.Unlock()
		doing = what
	}
	// Indented, not "[name] ": scripts take that line for the step's end.
	stop := Heartbeat(progressInterval, func(elapsed time.Duration) {
		mu.Lock()
		at := doing
		mu.Unlock()
		if at != "" {
			at = ": " + at
		}
		fmt.Fprintf(out, "  %s: still running (%s)%s\n", name, elapsed, at)
	})
	res, err := run(ctx, env, ss)
	stop()
	ss.doing = nil
	if err != nil {
		return Result{}, fmt.Errorf("%s %s: %w", what, name, err)
	}
	printResult(out, name, res, env.Options.DryRun)
	return res, nil
}

// Revert undoes the recorded changes, last step first.
func (r Runner) Revert(ctx context.Context, env *Env, out io.Writer) error {
	st, err := r.loadState(ctx, env)
	if err != nil {
		return err
	}
	steps := slices.Clone(r.Steps)
	slices.Reverse(steps)
	for _, step := range steps {
		// A step with records but not applied is one an install was
		// interrupted in (killed, or failed): what it did so far is undone too.
		if ss, ok := st.steps[step.Name]; !ok || (!ss.Applied && len(ss.Records) == 0) {
			fmt.Fprintf(out, "[%s] not applied: nothing to revert\n", step.Name)
			if !env.Options.DryRun {
				// An entry without records (a step that did not apply) holds
				// nothing to undo; left there it would keep the state alive.
				delete(st.steps, step.Name)
			}
			continue
		}
		if _, err := runStep(ctx, env, out, step.Name, step.Revert, st.step(step.Name), "reverting step"); err != nil {
			return err
		}
		if env.Options.DryRun {
			continue
		}
		delete(st.steps, step.Name)
		if err := st.persist(ctx); err != nil {
			return err
		}
	}
	if env.Options.DryRun || len(st.steps) > 0 || st.cm == nil {
		return nil
	}
	// Fully reverted: the state goes too, leaving the cluster as it was.
	if err := env.Client.Delete(ctx, st.cm); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting install state: %w", err)
	}
	return nil
}

// StatusReport is one step's line of `status`, and its entry in `status
// -o json|yaml` (documented in docs/cli.md: fields are only ever added).
type StatusReport struct {
	Step   string     `json:"name"`
	Status StepStatus `json:"state"`
	Detail string     `json:"detail,omitempty"`
	// Recorded: the install state records the step as applied (install ran
	// it to the end), whatever the cluster shows now.
	Recorded bool `json:"recorded"`
}

// Status reports each step.
func (r Runner) Status(ctx context.Context, env *Env) ([]StatusReport, error) {
	st, err := r.loadState(ctx, env)
	if err != nil {
		return nil, err
	}
	var reports []StatusReport
	for _, step := range r.Steps {
		ss := st.step(step.Name)
		s, detail, err := step.Status(ctx, env, ss)
		if err != nil {
			return nil, fmt.Errorf("status of step %s: %w", step.Name, err)
		}
		// Skipped and not there: say so, and how to apply it, rather
		// than what is missing. Applied by other means, it is applied.
		if !ss.Applied && ss.Skipped != "" && s != Applied {
			s, detail = Skipped, "the last install skipped it; to apply it: "+ss.Skipped
		}
		reports = append(reports, StatusReport{Step: step.Name, Status: s, Detail: detail, Recorded: ss.Applied})
	}
	return reports, nil
}

// loadState is loadState refusing a state that an install of another
// layout wrote: its steps would be skipped as "not applied".
func (r Runner) loadState(ctx context.Context, env *Env) (*state, error) {
	st, err := loadState(ctx, env)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(st.steps)) {
		if slices.ContainsFunc(r.Steps, func(s Step) bool { return s.Name == name }) {
			continue
		}
		if owner := r.Owner(name); owner != "" {
			return nil, fmt.Errorf("the install state holds step %s of --profile %s: run with --profile %s", name, owner, owner)
		}
	}
	return st, nil
}

func printResult(out io.Writer, name string, res Result, dryRun bool) {
	prefix := ""
	if dryRun && res.Changed {
		prefix = "would: "
	}
	fmt.Fprintf(out, "[%s] %s%s\n", name, prefix, res.Summary)
	if dryRun {
		for _, d := range res.Diffs {
			fmt.Fprint(out, d)
		}
	}
}
