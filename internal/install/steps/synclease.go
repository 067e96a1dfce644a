package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clearStaleSyncLease deletes the sync's Lease when its holder is a pod
// that no longer exists, and says so ("" when it kept or found none). A
// sync removed without revert (`kubectl delete -k deploy/...` takes its
// RBAC with it, so its pod cannot release the Lease) leaves the Lease
// held: client-go counts the lease duration from when a candidate first
// sees the record, so the new sync would write nothing for that long after
// install returns, and a node added meanwhile would go unanswered. Once
// deleted, the new sync takes the Lease at its next retry. The delete is
// conditional on the resourceVersion read: a holder that renewed since
// keeps it.
func clearStaleSyncLease(ctx context.Context, env *engine.Env) (string, error) {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.LeaderElectionID}
	if err := env.Client.Get(ctx, key, lease); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	if holder == "" {
		return "", nil
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace)); err != nil {
		return "", fmt.Errorf("listing pods: %w", err)
	}
	if slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == holderPod(holder) }) {
		return "", nil
	}
	err := env.Client.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("deleting Lease %s, held by %s, a pod that no longer exists: %w", key, holder, err)
	}
	return fmt.Sprintf("deleted Lease %s held by %s, a pod that no longer exists", key, holderPod(holder)), nil
}

// holderPod is the pod name in a controller-runtime leader identity,
// "<hostname>_<uuid>"; a pod's hostname is its name.
func holderPod(identity string) string {
	if i := strings.LastIndex(identity, "_"); i > 0 {
		return identity[:i]
	}
	return identity
}
