package install

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

func (o Options) validate() error {
	p, err := profileNamed(o.Profile)
	if err != nil {
		return err
	}
	for _, s := range o.Skip {
		if names := p.stepNames(); !slices.Contains(names, s) {
			return fmt.Errorf("--skip %q: unknown step (steps: %s)", s, strings.Join(names, ","))
		}
	}
	for _, sm := range []string{o.KubeletServiceMonitor, o.NodeExporterServiceMonitor} {
		if _, err := ParseNamespacedName(sm); sm != "" && err != nil {
			return fmt.Errorf("ServiceMonitor %w", err)
		}
	}
	return nil
}

// Install runs the steps in order, printing a line per step. A step that
// fails stops the run; what earlier steps did is recorded, so running
// install again carries on from there.
func Install(ctx context.Context, env *Env, out io.Writer) error {
	if err := env.Options.validate(); err != nil {
		return err
	}
	st, p, err := loadProfileState(ctx, env)
	if err != nil {
		return err
	}
	if err := preflight(ctx, env, p, out); err != nil {
		return err
	}
	for _, step := range p.allSteps() {
		if slices.Contains(env.Options.Skip, step.Name) {
			fmt.Fprintf(out, "[%s] skipped\n", step.Name)
			continue
		}
		ss := st.step(step.Name)
		res, err := runStep(ctx, env, out, step.Name, step.Install, ss, "step")
		if err != nil {
			return err
		}
		if env.Options.DryRun || res.Skipped {
			continue
		}
		ss.Applied = true
		if err := st.persist(ctx); err != nil {
			return err
		}
	}
	return nil
}

// runStep runs one step's install or revert and prints its line; what
// names the run in an error ("step", "reverting step").
func runStep(ctx context.Context, env *Env, out io.Writer, name string, run func(context.Context, *Env, *stepState) (Result, error),
	ss *stepState, what string) (Result, error) {
	res, err := run(ctx, env, ss)
	if err != nil {
		return Result{}, fmt.Errorf("%s %s: %w", what, name, err)
	}
	printResult(out, name, res, env.Options.DryRun)
	return res, nil
}

// Revert undoes the recorded changes, last step first.
func Revert(ctx context.Context, env *Env, out io.Writer) error {
	st, p, err := loadProfileState(ctx, env)
	if err != nil {
		return err
	}
	steps := p.allSteps()
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

// StatusReport is one step's line of `status`.
type StatusReport struct {
	Step   string
	Status StepStatus
	Detail string
}

// Status reports each step.
func Status(ctx context.Context, env *Env) ([]StatusReport, error) {
	st, p, err := loadProfileState(ctx, env)
	if err != nil {
		return nil, err
	}
	var reports []StatusReport
	for _, step := range p.allSteps() {
		s, detail, err := step.Status(ctx, env, st.step(step.Name))
		if err != nil {
			return nil, fmt.Errorf("status of step %s: %w", step.Name, err)
		}
		reports = append(reports, StatusReport{Step: step.Name, Status: s, Detail: detail})
	}
	return reports, nil
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
