package install

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// corednsDaemonSetStep runs CoreDNS as a DaemonSet on every node (so edge
// nodes resolve locally when cut off), and scales the Deployment to 0 only
// once the DaemonSet's pods are Ready on every Ready node and are ready
// endpoints of kube-dns: DNS never goes dark. NotReady nodes (normal for a
// cut-off edge node) do not block; they are named.
func corednsDaemonSetStep() Step {
	replicas := fieldEdit{
		key: fmt.Sprintf("Deployment %s/%s replicas", tunnelnodes.Namespace, tunnelnodes.CoreDNSName),
		get: func(ctx context.Context, env *Env) (string, bool, error) {
			d := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, key(tunnelnodes.CoreDNSName), d); err != nil {
				return "", false, fmt.Errorf("reading Deployment coredns: %w", err)
			}
			n := int32(1)
			if d.Spec.Replicas != nil {
				n = *d.Spec.Replicas
			}
			return strconv.Itoa(int(n)), true, nil
		},
		set: func(ctx context.Context, env *Env, value string, _ bool) error {
			n, err := strconv.Atoi(value)
			if err != nil {
				return err
			}
			d := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, key(tunnelnodes.CoreDNSName), d); err != nil {
				return err
			}
			patch := client.MergeFrom(d.DeepCopy())
			d.Spec.Replicas = new(int32(n))
			return env.Client.Patch(ctx, d, patch)
		},
		desired: func(*Env, string, bool) (string, error) { return "0", nil },
	}
	daemonSet := func(ctx context.Context, env *Env) (*unstructured.Unstructured, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key(tunnelnodes.CoreDNSName), d); err != nil {
			return nil, fmt.Errorf("reading Deployment coredns: %w", err)
		}
		ds, err := daemonSetFromDeployment(d, env.Options.CoreDNSImage)
		if err != nil {
			return nil, err
		}
		return toUnstructured(ds, "apps/v1", "DaemonSet"), nil
	}
	return Step{
		Name: "coredns-daemonset",
		Install: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			ds, err := daemonSet(ctx, env)
			if err != nil {
				return Result{}, err
			}
			createdDS, dsDiff, err := ensureCreated(ctx, env, ss, ds)
			if err != nil {
				return Result{}, err
			}
			var res Result
			if createdDS {
				res.Diffs = append(res.Diffs, dsDiff)
			}
			var notReady []string
			var scaled bool
			var diff, note string
			scale := func() (err error) {
				scaled, diff, err = replicas.install(ctx, env, ss)
				return err
			}
			if env.Options.DryRun {
				err = scale()
			} else {
				note, err = handOffToDaemonSet(ctx, env, &notReady, scale)
			}
			if err != nil {
				return Result{}, err
			}
			if scaled {
				res.Diffs = append(res.Diffs, diff)
			}
			res.Changed = createdDS || scaled
			res.Summary = "already applied"
			if res.Changed {
				res.Summary = "DaemonSet coredns Ready on every Ready node and behind kube-dns; Deployment coredns scaled to 0"
			}
			if len(notReady) > 0 {
				res.Summary += " (NotReady nodes not waited for: " + strings.Join(notReady, ", ") + ")"
			}
			if note != "" {
				res.Summary += "; " + note
			}
			return res, nil
		},
		Revert: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			if !env.Options.DryRun {
				if err := endHandOff(ctx, env, kubeDNSService); err != nil { // an interrupted run's
					return Result{}, err
				}
			}
			outcome, diff, err := replicas.revert(ctx, env, ss)
			if err != nil {
				return Result{}, err
			}
			deleted, note := false, ""
			remove := func() (err error) {
				deleted, err = deleteCreated(ctx, env, ss, namedObject("apps/v1", "DaemonSet", tunnelnodes.CoreDNSName))
				return err
			}
			// Restoring: this revert scaled the Deployment back, or an earlier
			// one did and was interrupted before it was available.
			if ss.Records[replicas.key].Restoring && !env.Options.DryRun {
				note, err = handOffToDeployment(ctx, env, remove)
			} else {
				err = remove()
			}
			if err != nil {
				return Result{}, err
			}
			summary := "Deployment coredns scaled back, available and behind kube-dns; DaemonSet coredns deleted"
			if outcome == changedSince {
				summary = replicas.leftAsIs()
			}
			if note != "" {
				summary += "; " + note
			}
			res := Result{Changed: outcome == restored || deleted, Summary: summary}
			if diff != "" {
				res.Diffs = []string{diff}
			}
			return res, nil
		},
		Status: func(ctx context.Context, env *Env, ss *stepState) (StepStatus, string, error) {
			exists, err := existsAll(ctx, env, []*unstructured.Unstructured{namedObject("apps/v1", "DaemonSet", tunnelnodes.CoreDNSName)})
			if err != nil {
				return "", "", err
			}
			s, detail, err := replicas.status(ctx, env, ss)
			if err != nil {
				return "", "", err
			}
			switch {
			case exists && s == Applied:
				return Applied, "", nil
			case ss.Applied:
				return Drifted, strings.TrimSpace("DaemonSet or Deployment changed after install " + detail), nil
			}
			return NotApplied, "", nil
		},
	}
}

// handOffToDaemonSet waits until the DaemonSet serves on every Ready node,
// behind kube-dns, then moves kube-dns's traffic off the Deployment's pods
// (see drain) and scales it down with scale.
func handOffToDaemonSet(ctx context.Context, env *Env, notReady *[]string, scale func() error) (note string, err error) {
	if err := endHandOff(ctx, env, kubeDNSService); err != nil { // an interrupted run's
		return "", err
	}
	var podIPs []string
	err = waitFor(ctx, env.Options.Timeout, "DaemonSet coredns not serving on every Ready node",
		both(daemonSetOnReadyNodes(env, tunnelnodes.CoreDNSName, notReady, &podIPs), serviceEndpointsReady(env, kubeDNSService, &podIPs)))
	if err != nil {
		return "", fmt.Errorf("%w; the coredns Deployment is left as it was", err)
	}
	ds := &appsv1.DaemonSet{}
	if err := env.Client.Get(ctx, key(tunnelnodes.CoreDNSName), ds); err != nil {
		return "", fmt.Errorf("reading DaemonSet %s: %w", tunnelnodes.CoreDNSName, err)
	}
	leaving, err := corednsDeploymentPods(ctx, env)
	if err != nil {
		return "", err
	}
	keep := map[string]string{templateGenerationLabel: ds.Annotations[templateGenerationAnnotation]}
	return handOff(ctx, env, kubeDNSService, leaving, keep, scale)
}

// handOffToDeployment waits until the Deployment serves behind kube-dns,
// then moves kube-dns's traffic off the DaemonSet's pods (see drain) and
// deletes it with remove.
func handOffToDeployment(ctx context.Context, env *Env, remove func() error) (note string, err error) {
	var podIPs []string
	err = waitFor(ctx, env.Options.Timeout, "Deployment coredns not available",
		both(deploymentServing(env, tunnelnodes.CoreDNSName, &podIPs), serviceEndpointsReady(env, kubeDNSService, &podIPs)))
	if err != nil {
		return "", fmt.Errorf("%w; the coredns DaemonSet is kept so DNS keeps answering", err)
	}
	pods, err := corednsDeploymentPods(ctx, env)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return podReady(&p) && p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != "" })
	if i < 0 {
		return "", fmt.Errorf("Deployment %s has no Ready pod", tunnelnodes.CoreDNSName)
	}
	keep := map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: pods[i].Labels[appsv1.DefaultDeploymentUniqueLabelKey]}
	ds := &appsv1.DaemonSet{}
	var leaving []corev1.Pod
	switch err := env.Client.Get(ctx, key(tunnelnodes.CoreDNSName), ds); {
	case err == nil:
		if leaving, err = controlledPods(ctx, env, ds.Spec.Selector, ds.UID); err != nil {
			return "", err
		}
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("reading DaemonSet %s: %w", tunnelnodes.CoreDNSName, err)
	}
	return handOff(ctx, env, kubeDNSService, leaving, keep, remove)
}

// corednsDeploymentPods are the pods of the coredns Deployment: the ones
// that leave kube-dns on install, and that it is handed back to on revert.
func corednsDeploymentPods(ctx context.Context, env *Env) ([]corev1.Pod, error) {
	d, _, err := readDeployment(ctx, env, tunnelnodes.CoreDNSName)
	if err != nil {
		return nil, err
	}
	return deploymentPods(ctx, env, d)
}
