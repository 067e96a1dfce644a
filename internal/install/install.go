package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/internal/version"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Install runs the profile's steps in order, printing a line per step (see
// Runner.Install).
func Install(ctx context.Context, env *engine.Env, out io.Writer) error {
	r, err := runnerFor(ctx, env)
	if err != nil {
		return err
	}
	l, err := layout.Named(env.Options.Profile)
	if err != nil {
		return err
	}
	// ValidateFlags checked --skip before the profile was settled.
	if err := validSkip(env.Options.Skip, l, r.Steps); err != nil {
		return err
	}
	return r.Install(ctx, env, out)
}

// Revert undoes what install recorded, last step first.
func Revert(ctx context.Context, env *engine.Env, out io.Writer) error {
	r, err := runnerFor(ctx, env)
	if err != nil {
		return err
	}
	return r.Revert(ctx, env, out)
}

// Report is what status reports; `status -o json|yaml` prints it.
// docs/cli.md documents its fields, which are only ever added to.
type Report struct {
	// Profile is the layout reported on: the one the install state
	// records, else --profile's.
	Profile string `json:"profile"`
	// Result sums the report up, as status's exit code does.
	Result Result                `json:"result"`
	Steps  []engine.StatusReport `json:"steps"`
	// NodeNamesWrong counts the node names that --verify-dns and
	// --verify-dns-from-control-plane found resolving wrong; absent when
	// neither ran.
	NodeNamesWrong *int `json:"nodeNamesWrong,omitempty"`
	// InstalledVersion is the yurtdns version whose install last ran to
	// the end; "" when not installed or installed before v0.1.0.
	InstalledVersion string `json:"installedVersion,omitempty"`
	// Version is this binary's.
	Version string `json:"version"`
	// Upgrade: install with this binary moves the cluster to its version.
	Upgrade bool `json:"upgrade"`
}

// VersionLine says which version is installed and what this binary's
// install would do to it.
func (r Report) VersionLine() string {
	switch c := version.Compare(r.InstalledVersion, r.Version); {
	case r.Result == ResultNotInstalled:
		return "yurtdns " + r.Version + ", not installed"
	case r.InstalledVersion == "":
		return "installed by yurtdns from before v0.1.0 (no version recorded): install upgrades it to " + r.Version
	case c < 0:
		return "yurtdns " + r.InstalledVersion + " installed: install upgrades it to this binary's " + r.Version
	case c > 0:
		return "yurtdns " + r.InstalledVersion + " installed, newer than this binary (" + r.Version + "): use the " + r.InstalledVersion + " binary"
	}
	return "yurtdns " + r.InstalledVersion + " installed"
}

// Result is status's verdict.
type Result string

const (
	// ResultApplied: install ran, and nothing it applied has drifted.
	ResultApplied Result = "applied"
	// ResultNotInstalled: the install state records no step as applied.
	ResultNotInstalled Result = "not installed"
	// ResultDrifted: a step drifted, or a node name resolves wrong.
	ResultDrifted Result = "drifted"
)

// Status reports each of the profile's steps.
func Status(ctx context.Context, env *engine.Env) (Report, error) {
	r, err := runnerFor(ctx, env)
	if err != nil {
		return Report{}, err
	}
	steps, err := r.Status(ctx, env)
	if err != nil {
		return Report{}, err
	}
	installed, exists, err := engine.RecordedVersion(ctx, env)
	if err != nil {
		return Report{}, err
	}
	res := verdict(steps)
	return Report{Profile: env.Options.Profile, Result: res, Steps: steps, InstalledVersion: installed, Version: version.Version,
		Upgrade: exists && res != ResultNotInstalled && version.Compare(installed, version.Version) < 0}, nil
}

// verdict is the Result of the steps' reports alone.
func verdict(steps []engine.StatusReport) Result {
	if slices.ContainsFunc(steps, func(s engine.StatusReport) bool { return s.Status == engine.Drifted }) {
		return ResultDrifted
	}
	if !slices.ContainsFunc(steps, func(s engine.StatusReport) bool { return s.Recorded }) {
		return ResultNotInstalled
	}
	return ResultApplied
}

// AddWrongNodeNames counts in what a check of the node names found: one
// resolving wrong is drift, whatever the steps say.
func (r *Report) AddWrongNodeNames(n int) {
	if r.NodeNamesWrong != nil {
		n += *r.NodeNamesWrong
	}
	r.NodeNamesWrong = &n
	if n > 0 {
		r.Result = ResultDrifted
	}
}

// runnerFor settles env's profile with the install state's and builds the
// runner of its steps.
func runnerFor(ctx context.Context, env *engine.Env) (engine.Runner, error) {
	if err := ResolveProfile(ctx, env); err != nil {
		return engine.Runner{}, err
	}
	l, err := layout.Named(env.Options.Profile)
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

// ResolveProfile sets env's profile (Options.Profile, "" when --profile was
// not given) to the one the install state records, which a state holds the
// changes of: a --profile that differs is refused.
func ResolveProfile(ctx context.Context, env *engine.Env) error {
	recorded, err := engine.RecordedProfile(ctx, env)
	if err != nil {
		return err
	}
	switch given := env.Options.Profile; {
	case recorded == "":
		// No state, or one from before the profile was recorded: the
		// runner refuses the latter when it holds another layout's steps.
	case given == "":
		env.Options.Profile = recorded
	case given != recorded:
		return fmt.Errorf("--profile %s: the install state (ConfigMap %s/%s) records --profile %s; leave --profile out, or revert before installing another profile",
			given, tunnelnodes.Namespace, engine.StateConfigMap, recorded)
	}
	// By name, as the state records it ("" is the default layout).
	l, err := layout.Named(env.Options.Profile)
	if err != nil {
		return err
	}
	env.Options.Profile = l.Name
	return nil
}

// ValidateFlags refuses a flag value that cannot work, naming the valid
// ones, before any call to the apiserver: a typo costs no wait. --skip is
// checked against --profile's steps, or without --profile against every
// profile's (Install checks it again once the profile is settled).
func ValidateFlags(o engine.Options) error {
	if o.Timeout < 0 {
		return fmt.Errorf("--timeout %s: must be 0 or more", o.Timeout)
	}
	layouts := layout.All()
	if o.Profile != "" {
		l, err := layout.Named(o.Profile)
		if err != nil {
			return err
		}
		layouts = []layout.Layout{l}
	}
	var refusals []string
	for _, l := range layouts {
		plan, err := steps.Plan(l)
		if err != nil {
			return err
		}
		err = validSkip(o.Skip, l, plan)
		if err == nil {
			refusals = nil // one profile's steps
			break
		}
		refusals = append(refusals, err.Error())
	}
	if len(refusals) > 0 {
		return errors.New(strings.Join(refusals, "; "))
	}
	if err := engine.ValidNodeLifecycle(o.NodeLifecycle); err != nil {
		return err
	}
	for _, sm := range []string{o.KubeletServiceMonitor, o.NodeExporterServiceMonitor} {
		if _, err := steps.ParseNamespacedName(sm); sm != "" && err != nil {
			return fmt.Errorf("ServiceMonitor %w", err)
		}
	}
	return nil
}

// validSkip refuses a --skip that names none of the layout's steps.
func validSkip(skip []string, l layout.Layout, plan []engine.Step) error {
	var names []string
	for _, s := range plan {
		names = append(names, s.Name)
	}
	for _, s := range skip {
		if !slices.Contains(names, s) {
			return fmt.Errorf("--skip %q: no such step of --profile %s (its steps: %s)", s, l.Name, strings.Join(names, ","))
		}
	}
	return nil
}

// Profiles lists each profile (layout) with its steps in order, for the
// long help of install, revert and status.
func Profiles() string {
	var b strings.Builder
	b.WriteString("Profiles (--profile) and their steps, in order:\n")
	for i, l := range layout.All() {
		own, optIn, err := steps.StepNames(l)
		if err != nil {
			own = []string{err.Error()}
		}
		def := ""
		if i == 0 {
			def = ", the default"
		}
		fmt.Fprintf(&b, "  %s (%s%s):\n    %s\n", l.Name, l.Help, def, strings.Join(own, ", "))
		if len(optIn) > 0 {
			fmt.Fprintf(&b, "    then, when asked: %s\n", strings.Join(optIn, ", "))
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
