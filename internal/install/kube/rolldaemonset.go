package kube

import (
	"context"
	"fmt"
	"slices"

	"github.com/yurtdns/yurtdns/internal/install/engine"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A DaemonSet's own rolling update deletes a node's old pod once the surge
// pod beside it has been available for minReadySeconds: for pods behind a
// Service, that is the race drain describes (on the real cluster, 1 to 3
// of about 900 single-try queries lost per roll of the coredns DaemonSet).
// So install takes the roll of such a DaemonSet over: it applies the new
// template held (HeldRollout: every node surges at once, and no new pod
// counts as available, so the controller deletes no old one), waits until
// each Ready node runs a Ready new pod behind the Service, hands the
// Service off the old pods and deletes them (HandOff), and only then
// applies the DaemonSet as it stays.

// rollHoldSeconds is a held DaemonSet's minReadySeconds: longer than any
// roll install waits for, and short enough that a roll left held by a
// killed install, and never run again, is finished by the controller itself
// within the hour.
const rollHoldSeconds = 3600

// HeldRollout is the DaemonSet obj with its rolling update held: surge on
// every node, new pods never available for the controller.
func HeldRollout(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	held := obj.DeepCopy()
	if err := unstructured.SetNestedField(held.Object, int64(rollHoldSeconds), "spec", "minReadySeconds"); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedField(held.Object, "100%", "spec", "updateStrategy", "rollingUpdate", "maxSurge"); err != nil {
		return nil, err
	}
	return held, nil
}

// ApplyDryRun is what Apply would do to obj, and its diff, with nothing
// written.
func ApplyDryRun(ctx context.Context, env *engine.Env, ss *engine.StepState, obj *unstructured.Unstructured) (Applied, string, error) {
	dry := *env
	dry.Options.DryRun = true
	return Apply(ctx, &dry, ss, obj.DeepCopy())
}

// OlderDaemonSetPods are ds's pods of an older template on nodes not in
// notReady, not yet being deleted: the ones a roll replaces. Those on
// NotReady nodes are left to the controller for when the node is back.
func OlderDaemonSetPods(ctx context.Context, env *engine.Env, ds *appsv1.DaemonSet, notReady []string) ([]corev1.Pod, error) {
	pods, err := ControlledPods(ctx, env, ds.Spec.Selector, ds.UID)
	if err != nil {
		return nil, err
	}
	current := ds.Annotations[TemplateGenerationAnnotation]
	return slices.DeleteFunc(pods, func(p corev1.Pod) bool {
		return p.Labels[TemplateGenerationLabel] == current || p.DeletionTimestamp != nil || slices.Contains(notReady, p.Spec.NodeName)
	}), nil
}

// DeletePods deletes exactly these pods (not others by their names since).
func DeletePods(ctx context.Context, env *engine.Env, pods []corev1.Pod) error {
	for i := range pods {
		uid := pods[i].UID
		if err := client.IgnoreNotFound(env.Client.Delete(ctx, &pods[i], client.Preconditions{UID: &uid})); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting pod %s: %w", pods[i].Name, err)
		}
	}
	return nil
}
