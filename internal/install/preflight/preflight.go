// Package preflight is `tunnel-nodes-sync check` (and `install --check`):
// it reads the cluster, changes nothing, and says of each prerequisite of
// install what it found and what to do about it, as `linkerd check --pre`
// does. The prerequisites are read as the steps read them (internal/install/
// steps), so the check and install cannot disagree.
package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Outcome is a check's verdict, and the report's (the worst of them).
type Outcome string

const (
	Pass Outcome = "pass"
	// Warn: install can run, but the operator should know (untested ground,
	// something the API does not show).
	Warn Outcome = "warn"
	// Fail: install would stop, or leave the cluster worse, until the action
	// is taken.
	Fail Outcome = "fail"
)

// Result is one check's line of `check`, and its entry in `check -o
// json|yaml` (docs/cli.md documents the fields, which are only ever added).
type Result struct {
	Name    string  `json:"name"`
	Outcome Outcome `json:"result"`
	// Found is what the check read.
	Found string `json:"found"`
	// Action is what to do; empty on a pass.
	Action string `json:"action,omitempty"`
	// Nodes are the nodes a warning or failure is about, all of them
	// (Found names the first few).
	Nodes []string `json:"nodes,omitempty"`
}

// Report is what check reports.
type Report struct {
	Profile string   `json:"profile"`
	Result  Outcome  `json:"result"`
	Checks  []Result `json:"checks"`
}

// cluster is what the checks read. The nodes and kube-system's pods are
// listed once for all the checks (a fleet has thousands).
type cluster struct {
	env    *engine.Env
	layout layout.Layout
	nodes  []corev1.Node
	pods   []corev1.Pod
}

// get reads a kube-system object; false when it does not exist.
func (c *cluster) get(ctx context.Context, obj client.Object, name string) (bool, error) {
	err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: tunnelnodes.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %T %s: %w", obj, name, err)
	}
	return true, nil
}

// check is one prerequisite: an error is one it could not read.
type check func(context.Context, *cluster) (Result, error)

// plans are the checks per layout, in the order they print, as
// steps.Plan has the steps.
var plans = map[string][]check{
	layout.YurtTunnel: {profileFits, containerRuntime, openYurt(true), controlPlanesAlike, yurthub, tunnelService, tunnelServerStrategy, edgeKubeletWatchList, images, kubeadmDNS},
	// Raven's steps leave the control plane and kubeadm's CoreDNS alone.
	layout.Raven: {profileFits, containerRuntime, openYurt(false), yurthub, tunnelService, edgeKubeletWatchList, images},
}

// Run runs the checks of env's profile (already resolved with the install
// state's, see install.ResolveProfile). It only reads.
func Run(ctx context.Context, env *engine.Env) (Report, error) {
	l, err := layout.Named(env.Options.Profile)
	if err != nil {
		return Report{}, err
	}
	checks, ok := plans[l.Name]
	if !ok {
		return Report{}, fmt.Errorf("layout %s has no pre-flight checks", l.Name)
	}
	c := &cluster{env: env, layout: l}
	nodes := &corev1.NodeList{}
	if err := env.Client.List(ctx, nodes); err != nil {
		return Report{}, fmt.Errorf("listing nodes: %w", err)
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace)); err != nil {
		return Report{}, fmt.Errorf("listing pods of %s: %w", tunnelnodes.Namespace, err)
	}
	c.nodes, c.pods = nodes.Items, pods.Items
	slices.SortFunc(c.nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	r := Report{Profile: l.Name, Result: Pass}
	for _, chk := range checks {
		res, err := chk(ctx, c)
		if err != nil {
			return Report{}, err
		}
		r.Checks = append(r.Checks, res)
		if res.Outcome == Fail || (res.Outcome == Warn && r.Result == Pass) {
			r.Result = res.Outcome
		}
	}
	return r, nil
}

// Line is a result as check prints it: `✔ name: found`, or with the action
// after a dash.
func (r Result) Line() string {
	mark := map[Outcome]string{Pass: "✔", Warn: "⚠", Fail: "✖"}[r.Outcome]
	line := mark + " " + r.Name + ": " + r.Found
	if r.Action != "" {
		line += " — " + r.Action
	}
	return line
}

// shownNodes is how many nodes a line names before "and N more".
const shownNodes = 10

// nodeNames names the first few nodes.
func nodeNames(names []string) string {
	if len(names) <= shownNodes {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shownNodes], ", "), len(names)-shownNodes)
}
