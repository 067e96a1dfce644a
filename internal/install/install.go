package install

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/internal/layout"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Install runs --profile's steps in order, printing a line per step (see
// Runner.Install).
func Install(ctx context.Context, env *engine.Env, out io.Writer) error {
	r, err := runnerFor(env.Options)
	if err != nil {
		return err
	}
	if err := validate(env.Options, r.Steps); err != nil {
		return err
	}
	return r.Install(ctx, env, out)
}

// Revert undoes what install recorded under --profile, last step first.
func Revert(ctx context.Context, env *engine.Env, out io.Writer) error {
	r, err := runnerFor(env.Options)
	if err != nil {
		return err
	}
	return r.Revert(ctx, env, out)
}

// Status reports each of --profile's steps.
func Status(ctx context.Context, env *engine.Env) ([]engine.StatusReport, error) {
	r, err := runnerFor(env.Options)
	if err != nil {
		return nil, err
	}
	return r.Status(ctx, env)
}

// runnerFor builds the runner of --profile's steps.
func runnerFor(o engine.Options) (engine.Runner, error) {
	l, err := layout.Named(o.Profile)
	if err != nil {
		return engine.Runner{}, err
	}
	plan, err := steps.Plan(l)
	if err != nil {
		return engine.Runner{}, err
	}
	return engine.Runner{
		Steps: plan,
		// Refuses a layout whose objects the cluster lacks (and hints at
		// another layout when the cluster looks like it).
		Preflight: func(ctx context.Context, env *engine.Env, out io.Writer) error {
			return l.Preflight(func(obj client.Object, name string) (bool, error) {
				err := env.Client.Get(ctx, kube.Key(name), obj)
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return err == nil, err
			}, out)
		},
		Owner: func(step string) string {
			for _, other := range layout.All() {
				if plan, err := steps.Plan(other); err == nil && slices.ContainsFunc(plan, func(s engine.Step) bool { return s.Name == step }) {
					return other.Name
				}
			}
			return ""
		},
	}, nil
}

// validate checks install's flags against the layout's steps.
func validate(o engine.Options, plan []engine.Step) error {
	var names []string
	for _, s := range plan {
		names = append(names, s.Name)
	}
	for _, s := range o.Skip {
		if !slices.Contains(names, s) {
			return fmt.Errorf("--skip %q: unknown step (steps: %s)", s, strings.Join(names, ","))
		}
	}
	switch o.NodeLifecycle {
	case "", engine.NodeLifecycleAuto, engine.NodeLifecycleDisable, engine.NodeLifecycleKeep:
	default:
		return fmt.Errorf("--kcm-nodelifecycle %q: must be %s, %s or %s", o.NodeLifecycle, engine.NodeLifecycleAuto, engine.NodeLifecycleDisable, engine.NodeLifecycleKeep)
	}
	for _, sm := range []string{o.KubeletServiceMonitor, o.NodeExporterServiceMonitor} {
		if _, err := steps.ParseNamespacedName(sm); sm != "" && err != nil {
			return fmt.Errorf("ServiceMonitor %w", err)
		}
	}
	return nil
}

// Describe lists each layout with its steps, for install's help.
func Describe() string {
	var parts []string
	for _, l := range layout.All() {
		own, optIn, err := steps.StepNames(l)
		if err != nil {
			own = []string{err.Error()}
		}
		parts = append(parts, fmt.Sprintf("%s (%s; steps: %s; then %s)", l.Name, l.Help, strings.Join(own, ","), strings.Join(optIn, ",")))
	}
	return strings.Join(parts, " or ")
}
