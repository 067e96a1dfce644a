package install

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options are install's flags.
type Options struct {
	DryRun       bool
	Skip         []string
	CoreDNSImage string
	SyncImage    string
	// ManifestsDir is the local static pod manifests directory; empty skips
	// the control-plane step unless ControlPlaneJobs is set.
	ManifestsDir string
	BackupDir    string
	// ControlPlaneJobs runs patch-manifests in a Job on each control-plane node.
	ControlPlaneJobs bool
	// NodeName is the node whose kubelet runs ManifestsDir: install waits
	// for its mirror pods after each manifest it writes.
	NodeName string
	Timeout  time.Duration
	// TestOnlyExtraFlags (hidden --test-only-extra-flag) adds a flag to a
	// component's patched command, so tests can make a patch that does not
	// come up and see it rolled back.
	TestOnlyExtraFlags map[string]string
	// KubeletServiceMonitor and NodeExporterServiceMonitor (NAMESPACE/NAME)
	// are what the prometheus step relabels; empty: kube-prometheus's.
	KubeletServiceMonitor      string
	NodeExporterServiceMonitor string
	// Profile is the tunnel layout, which decides the steps (see profiles;
	// "" is the first).
	Profile string
	// NodeLocalDNS runs the node-local-dns step (it is skipped otherwise).
	NodeLocalDNS bool
}

// manifestOptions writes the control-plane manifests live: each waited for.
func (e *Env) manifestOptions() ManifestOptions {
	return ManifestOptions{DryRun: e.Options.DryRun, TestOnlyExtraFlags: e.Options.TestOnlyExtraFlags,
		Kubelet: &KubeletWait{Client: e.Client, Node: e.Options.NodeName, Timeout: e.Options.Timeout}}
}

// Env is what every step works with.
type Env struct {
	Client    client.Client
	Clientset kubernetes.Interface
	Options   Options

	serverVersion *version.Info
}

// serverOlderThan reports whether the apiserver is older than major.minor.
func (e *Env) serverOlderThan(major, minor int) (bool, error) {
	if e.serverVersion == nil {
		v, err := e.Clientset.Discovery().ServerVersion()
		if err != nil {
			return false, fmt.Errorf("reading the server version: %w", err)
		}
		e.serverVersion = v
	}
	// Strict: an unstamped build reports v0.0.0-master+$Format:%H$, which
	// must not pass for an old server.
	v, err := utilversion.ParseSemantic(e.serverVersion.GitVersion)
	if err == nil && v.Major() == 0 {
		err = fmt.Errorf("not a Kubernetes release")
	}
	if err != nil {
		return false, fmt.Errorf("cannot tell the apiserver's version from %q: %w", e.serverVersion.GitVersion, err)
	}
	return v.LessThan(utilversion.MajorMinor(uint(major), uint(minor))), nil
}

// Result is what one step did (or, in a dry run, would do).
type Result struct {
	Changed bool
	// Skipped: the step does not apply to this cluster (Summary says why);
	// it is not recorded applied.
	Skipped bool
	// Summary is the progress line: what changed, or why nothing did.
	Summary string
	// Diffs are unified diffs of every object field or file the step changes.
	Diffs []string
}

// StepStatus is a step's state as `status` reports it.
type StepStatus string

const (
	Applied    StepStatus = "applied"
	NotApplied StepStatus = "not applied"
	Drifted    StepStatus = "drifted"
)

// Step is one named, idempotent, reversible part of the surgery.
type Step struct {
	Name    string
	Install func(context.Context, *Env, *stepState) (Result, error)
	Revert  func(context.Context, *Env, *stepState) (Result, error)
	Status  func(context.Context, *Env, *stepState) (StepStatus, string, error)
}

// Steps are install's steps, in order; revert runs them backwards.
func Steps() []Step {
	return []Step{recordsStep(), rbacStep(), corefileStep(), corednsDaemonSetStep(), kubeDNSTopologyStep(), kubeProxyStep(), controlPlaneStep(), syncStep(), prometheusStep()}
}

// StepNames lists the steps install runs by default under yurt-tunnel.
func StepNames() []string { return ProfileStepNames(ProfileYurtTunnel) }

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
