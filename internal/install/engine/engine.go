package engine

import (
	"context"
	"fmt"
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
	DryRun bool
	// Force: install this binary's version over a newer one the state
	// records (a downgrade).
	Force        bool
	Skip         []string
	CoreDNSImage string
	SyncImage    string
	// ManifestsDir is the local static pod manifests directory; empty skips
	// the control-plane step unless ControlPlaneJobs is set.
	ManifestsDir string
	BackupDir    string
	// KubeadmPatchesDir gets install's kubeadm patch (kube-apiserver's
	// dnsPolicy); empty: "patches" beside the manifests directory.
	KubeadmPatchesDir string
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
	// Profile is the tunnel layout, which decides the steps (see
	// internal/layout; "" is the default).
	Profile string
	// NodeLocalDNS runs the node-local-dns step (it is skipped otherwise).
	NodeLocalDNS bool
	// NodeLifecycle is what the control-plane step does with
	// kube-controller-manager's node lifecycle controller (--kcm-nodelifecycle):
	// NodeLifecycleAuto ("" too) decides by the OpenYurt version the cluster runs.
	NodeLifecycle string
}

// Env is what every step works with.
type Env struct {
	Client    client.Client
	Clientset kubernetes.Interface
	Options   Options

	serverVersion *version.Info
}

// ServerOlderThan reports whether the apiserver is older than major.minor.
func (e *Env) ServerOlderThan(major, minor int) (bool, error) {
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
	// ApplyWith, on a skipped step, says what applies it (the flag to
	// pass): the state records it, so that status says the step was skipped
	// and how to apply it rather than that it is missing.
	ApplyWith string
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
	// Skipped: the last install skipped the step (--skip, or a flag it
	// needs was not given) and the cluster does not run it.
	Skipped StepStatus = "skipped"
)

// Step is one named, idempotent, reversible part of the surgery.
type Step struct {
	Name string
	// OptIn is the flag that asks for a step every layout runs last only
	// when asked to ("" for the layout's own steps); Enabled says whether
	// the options ask for it.
	OptIn   string
	Enabled func(Options) bool
	Install func(context.Context, *Env, *StepState) (Result, error)
	Revert  func(context.Context, *Env, *StepState) (Result, error)
	Status  func(context.Context, *Env, *StepState) (StepStatus, string, error)
	// Preflight, when set, refuses a cluster the step cannot work on,
	// before install runs any step (only when the step is to run).
	Preflight func(context.Context, *Env) error
}

// The values of Options.NodeLifecycle.
const (
	NodeLifecycleAuto    = "auto"
	NodeLifecycleDisable = "disable"
	NodeLifecycleKeep    = "keep"
)

// NodeLifecycleValues are --kcm-nodelifecycle's values, the default first.
var NodeLifecycleValues = []string{NodeLifecycleAuto, NodeLifecycleDisable, NodeLifecycleKeep}

// ValidNodeLifecycle refuses a --kcm-nodelifecycle that is none of
// NodeLifecycleValues ("" is auto).
func ValidNodeLifecycle(v string) error {
	if v == "" || slices.Contains(NodeLifecycleValues, v) {
		return nil
	}
	return fmt.Errorf("--kcm-nodelifecycle %q: must be one of %s", v, strings.Join(NodeLifecycleValues, ", "))
}
