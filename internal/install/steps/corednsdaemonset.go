package steps

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"
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
func corednsDaemonSetStep() engine.Step {
	replicas := kube.FieldEdit{
		Key: fmt.Sprintf("Deployment %s/%s replicas", tunnelnodes.Namespace, tunnelnodes.CoreDNSName),
		Get: func(ctx context.Context, env *engine.Env) (string, bool, error) {
			d := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, kube.Key(tunnelnodes.CoreDNSName), d); err != nil {
				return "", false, fmt.Errorf("reading Deployment coredns: %w", err)
			}
			n := int32(1)
			if d.Spec.Replicas != nil {
				n = *d.Spec.Replicas
			}
			return strconv.Itoa(int(n)), true, nil
		},
		Set: func(ctx context.Context, env *engine.Env, value string, _ bool) error {
			n, err := strconv.Atoi(value)
			if err != nil {
				return err
			}
			d := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, kube.Key(tunnelnodes.CoreDNSName), d); err != nil {
				return err
			}
			patch := client.MergeFrom(d.DeepCopy())
			d.Spec.Replicas = new(int32(n))
			return env.Client.Patch(ctx, d, patch)
		},
		Desired: func(*engine.Env, string, bool) (string, error) { return "0", nil },
	}
	daemonSet := func(ctx context.Context, env *engine.Env) (*unstructured.Unstructured, error) {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, kube.Key(tunnelnodes.CoreDNSName), d); err != nil {
			return nil, fmt.Errorf("reading Deployment coredns: %w", err)
		}
		ds, err := daemonSetFromDeployment(d, env.Options.CoreDNSImage)
		if err != nil {
			return nil, err
		}
		return kube.ToUnstructured(ds, "apps/v1", "DaemonSet"), nil
	}
	return engine.Step{
		Name: "coredns-daemonset",
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			ds, err := daemonSet(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			appliedDS, dsDiff, err := kube.ApplyDryRun(ctx, env, ss, ds)
			if err != nil {
				return engine.Result{}, err
			}
			var res engine.Result
			if appliedDS != kube.Unchanged {
				res.Diffs = append(res.Diffs, dsDiff)
			}
			var notReady []string
			var scaled bool
			var diff, note string
			scale := func() (err error) {
				scaled, diff, err = replicas.Install(ctx, env, ss)
				return err
			}
			if env.Options.DryRun {
				err = scale()
			} else {
				note, err = handOffToDaemonSet(ctx, env, ss, ds, appliedDS, &notReady, scale)
			}
			if err != nil {
				return engine.Result{}, err
			}
			if scaled {
				res.Diffs = append(res.Diffs, diff)
			}
			res.Changed = appliedDS != kube.Unchanged || scaled
			switch {
			case !res.Changed:
				res.Summary = "already applied"
			case appliedDS == kube.Updated && !scaled:
				res.Summary = "DaemonSet coredns updated and rolled out: Ready on every Ready node and behind kube-dns"
			default:
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
		Revert: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			if !env.Options.DryRun {
				if err := kube.EndHandOff(ctx, env, kube.KubeDNSService); err != nil { // an interrupted run's
					return engine.Result{}, err
				}
			}
			outcome, diff, err := replicas.Revert(ctx, env, ss)
			if err != nil {
				return engine.Result{}, err
			}
			deleted, note := false, ""
			remove := func() (err error) {
				deleted, err = kube.DeleteCreated(ctx, env, ss, kube.NamedObject("apps/v1", "DaemonSet", tunnelnodes.CoreDNSName))
				return err
			}
			// Restoring: this revert scaled the Deployment back, or an earlier
			// one did and was interrupted before it was available.
			if ss.Records[replicas.Key].Restoring && !env.Options.DryRun {
				note, err = handOffToDeployment(ctx, env, remove)
			} else {
				err = remove()
			}
			if err != nil {
				return engine.Result{}, err
			}
			summary := "Deployment coredns scaled back, available and behind kube-dns; DaemonSet coredns deleted"
			if outcome == kube.ChangedSince {
				summary = replicas.LeftAsIs()
			}
			if note != "" {
				summary += "; " + note
			}
			res := engine.Result{Changed: outcome == kube.Restored || deleted, Summary: summary}
			if diff != "" {
				res.Diffs = []string{diff}
			}
			return res, nil
		},
		Status: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
			exists, err := kube.ExistsAll(ctx, env, []*unstructured.Unstructured{kube.NamedObject("apps/v1", "DaemonSet", tunnelnodes.CoreDNSName)})
			if err != nil {
				return "", "", err
			}
			s, detail, err := replicas.Status(ctx, env, ss)
			if err != nil {
				return "", "", err
			}
			switch {
			case exists && s == engine.Applied:
				return engine.Applied, "", nil
			case ss.Applied:
				return engine.Drifted, strings.TrimSpace("DaemonSet or Deployment changed after install " + detail), nil
			}
			return engine.NotApplied, "", nil
		},
	}
}

// handOffToDaemonSet applies the DaemonSet ds (applied says what that
// does to it), waits until it serves on every Ready node behind kube-dns,
// then moves kube-dns's traffic off the pods that leave (see drain): the
// DaemonSet's pods of an older template, deleted by install rather than by
// the DaemonSet controller (see kube.HeldRollout), and the Deployment's,
// scaled down with scale.
func handOffToDaemonSet(ctx context.Context, env *engine.Env, ss *engine.StepState, ds *unstructured.Unstructured, applied kube.Applied, notReady *[]string, scale func() error) (note string, err error) {
	if err := kube.EndHandOff(ctx, env, kube.KubeDNSService); err != nil { // an interrupted run's
		return "", err
	}
	write := ds
	if applied == kube.Updated {
		if write, err = kube.HeldRollout(ds); err != nil {
			return "", err
		}
	}
	if applied != kube.Unchanged {
		if _, _, err := kube.Apply(ctx, env, ss, write); err != nil {
			return "", err
		}
	}
	var podIPs []string
	err = kubewait.For(ctx, env.Options.Timeout, "DaemonSet coredns not serving on every Ready node",
		kube.Both(kube.DaemonSetSurged(env, tunnelnodes.CoreDNSName, notReady, &podIPs), kube.ServiceEndpointsReady(env, kube.KubeDNSService, &podIPs)))
	if err != nil {
		kept := "the coredns Deployment is left as it was"
		if write != ds {
			kept += ", and the DaemonSet's older pods keep serving (its roll held: install again finishes it)"
		}
		return "", fmt.Errorf("%w; %s", err, kept)
	}
	live := &appsv1.DaemonSet{}
	if err := env.Client.Get(ctx, kube.Key(tunnelnodes.CoreDNSName), live); err != nil {
		return "", fmt.Errorf("reading DaemonSet %s: %w", tunnelnodes.CoreDNSName, err)
	}
	older, err := kube.OlderDaemonSetPods(ctx, env, live, *notReady)
	if err != nil {
		return "", err
	}
	deployment, err := corednsDeploymentPods(ctx, env)
	if err != nil {
		return "", err
	}
	keep := map[string]string{kube.TemplateGenerationLabel: live.Annotations[kube.TemplateGenerationAnnotation]}
	note, err = kube.HandOff(ctx, env, kube.KubeDNSService, slices.Concat(older, deployment), keep, func() error {
		if err := kube.DeletePods(ctx, env, older); err != nil {
			return err
		}
		return scale()
	})
	if err != nil {
		return "", err
	}
	if write != ds { // the hold released: nothing of the template changes, nothing rolls
		if _, _, err := kube.Apply(ctx, env, ss, ds); err != nil {
			return "", err
		}
	}
	if len(older) > 0 {
		note = strings.TrimSuffix(fmt.Sprintf("%d pods of the older template drained from kube-dns, then deleted; %s", len(older), note), "; ")
	}
	return note, nil
}

// handOffToDeployment waits until the Deployment serves behind kube-dns,
// then moves kube-dns's traffic off the DaemonSet's pods (see drain) and
// deletes it with remove.
func handOffToDeployment(ctx context.Context, env *engine.Env, remove func() error) (note string, err error) {
	var podIPs []string
	err = kubewait.For(ctx, env.Options.Timeout, "Deployment coredns not available",
		kube.Both(kube.DeploymentServing(env, tunnelnodes.CoreDNSName, &podIPs), kube.ServiceEndpointsReady(env, kube.KubeDNSService, &podIPs)))
	if err != nil {
		return "", fmt.Errorf("%w; the coredns DaemonSet is kept so DNS keeps answering", err)
	}
	pods, err := corednsDeploymentPods(ctx, env)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool {
		return kubewait.PodReady(&p) && p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != ""
	})
	if i < 0 {
		return "", fmt.Errorf("Deployment %s has no Ready pod", tunnelnodes.CoreDNSName)
	}
	keep := map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: pods[i].Labels[appsv1.DefaultDeploymentUniqueLabelKey]}
	ds := &appsv1.DaemonSet{}
	var leaving []corev1.Pod
	switch err := env.Client.Get(ctx, kube.Key(tunnelnodes.CoreDNSName), ds); {
	case err == nil:
		if leaving, err = kube.ControlledPods(ctx, env, ds.Spec.Selector, ds.UID); err != nil {
			return "", err
		}
	case !apierrors.IsNotFound(err):
		return "", fmt.Errorf("reading DaemonSet %s: %w", tunnelnodes.CoreDNSName, err)
	}
	return kube.HandOff(ctx, env, kube.KubeDNSService, leaving, keep, remove)
}

// corednsDeploymentPods are the pods of the coredns Deployment: the ones
// that leave kube-dns on install, and that it is handed back to on revert.
func corednsDeploymentPods(ctx context.Context, env *engine.Env) ([]corev1.Pod, error) {
	d, _, err := kube.ReadDeployment(ctx, env, tunnelnodes.CoreDNSName)
	if err != nil {
		return nil, err
	}
	return kube.DeploymentPods(ctx, env, d)
}
