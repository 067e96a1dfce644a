package install

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/layout"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Install runs --profile's steps in order, printing a line per step (see
// Runner.Install).
func Install(ctx context.Context, env *Env, out io.Writer) error {
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
func Revert(ctx context.Context, env *Env, out io.Writer) error {
	r, err := runnerFor(env.Options)
	if err != nil {
		return err
	}
	return r.Revert(ctx, env, out)
}

// Status reports each of --profile's steps.
func Status(ctx context.Context, env *Env) ([]StatusReport, error) {
	r, err := runnerFor(env.Options)
	if err != nil {
		return nil, err
	}
	return r.Status(ctx, env)
}

// LayoutStepNames are the steps install runs under the named layout
// without an opt-in flag, in order.
func LayoutStepNames(name string) ([]string, error) {
	l, err := layout.Named(name)
	if err != nil {
		return nil, err
	}
	own, _, err := StepNames(l)
	return own, err
}

// runnerFor builds the runner of --profile's steps.
func runnerFor(o Options) (Runner, error) {
	l, err := layout.Named(o.Profile)
	if err != nil {
		return Runner{}, err
	}
	steps, err := Plan(l)
	if err != nil {
		return Runner{}, err
	}
	return Runner{
		Steps: steps,
		// Refuses a layout whose objects the cluster lacks (and hints at
		// another layout when the cluster looks like it).
		Preflight: func(ctx context.Context, env *Env, out io.Writer) error {
			return l.Preflight(func(obj client.Object, name string) (bool, error) {
				err := env.Client.Get(ctx, key(name), obj)
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return err == nil, err
			}, out)
		},
		Owner: func(step string) string {
			for _, other := range layout.All() {
				if steps, err := Plan(other); err == nil && slices.ContainsFunc(steps, func(s Step) bool { return s.Name == step }) {
					return other.Name
				}
			}
			return ""
		},
	}, nil
}

// validate checks install's flags against the layout's steps.
func validate(o Options, steps []Step) error {
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	for _, s := range o.Skip {
		if !slices.Contains(names, s) {
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
