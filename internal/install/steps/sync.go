package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncDeployment is deploy/'s tunnel-nodes-sync Deployment, both profiles.
const syncDeployment = "tunnel-nodes-sync"

// kubeDNSTopologyArg is the sync's flag that keeps the annotation the
// kube-dns-topology step sets (deploy/tunnel-nodes-sync passes it).
const kubeDNSTopologyArg = "--kube-dns-topology="

// syncStep deploys tunnel-nodes-sync from the kustomization dir of deploy/
// and waits for it to roll out: a Ready replica has synced its caches, so
// the records follow the nodes from the moment install returns (a Lease
// left by a sync removed without revert is cleared, not waited out). Revert
// waits for its pods to be gone: one still running would put kube-dns's
// topology annotation back after the kube-dns-topology step's revert
// removed it.
func syncStep(name, dir string) engine.Step {
	step := objectsStep(name, func(_ context.Context, env *engine.Env) ([]*unstructured.Unstructured, error) {
		return syncObjects(env, dir)
	})
	install := step.Install
	step.Install = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
		res, err := install(ctx, env, ss)
		if err != nil || env.Options.DryRun {
			return res, err
		}
		if err := kubewait.For(ctx, env.Options.Timeout, "Deployment "+syncDeployment+" not rolled out",
			kube.DeploymentRolledOut(env, syncDeployment, nil)); err != nil {
			return engine.Result{}, err
		}
		if res.Changed {
			res.Summary += "; rolled out"
		}
		cleared, err := clearStaleSyncLease(ctx, env)
		if err != nil {
			return engine.Result{}, err
		}
		if cleared != "" {
			res.Changed = true
			res.Summary += "; " + cleared
		}
		return res, nil
	}
	revert := step.Revert
	step.Revert = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
		res, err := revert(ctx, env, ss)
		if err != nil || env.Options.DryRun {
			return res, err
		}
		// Waited for even when nothing was left to delete: a revert killed
		// after the delete left the pods terminating.
		if err := kubewait.For(ctx, env.Options.Timeout, "pods of Deployment "+syncDeployment+" not gone", syncPodsGone(env)); err != nil {
			return engine.Result{}, err
		}
		if !res.Changed {
			return res, nil
		}
		// The sync's leader Lease goes too. Its pod, losing its RBAC with
		// the rest, cannot release it; left held, it would keep the next
		// install's sync waiting for the lease duration before writing.
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.LeaderElectionID, Namespace: tunnelnodes.Namespace}}
		if err := client.IgnoreNotFound(env.Client.Delete(ctx, lease)); err != nil {
			return engine.Result{}, fmt.Errorf("deleting the sync's Lease %s: %w", tunnelnodes.LeaderElectionID, err)
		}
		res.Summary += ", Lease " + tunnelnodes.Namespace + "/" + tunnelnodes.LeaderElectionID
		return res, nil
	}
	return step
}

// syncObjects renders dir as install applies it: the Deployment runs
// --sync-image, and keeps kube-dns's topology annotation only where install
// sets it (not with --skip kube-dns-topology).
func syncObjects(env *engine.Env, dir string) ([]*unstructured.Unstructured, error) {
	objs, err := deploy.Render(dir)
	if err != nil {
		return nil, err
	}
	keepTopology := !slices.Contains(env.Options.Skip, kubeDNSTopologyStepName)
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c := c.(map[string]any)
			if env.Options.SyncImage != "" {
				c["image"] = env.Options.SyncImage
			}
			if args, ok := c["args"].([]any); ok && !keepTopology {
				c["args"] = slices.DeleteFunc(args, func(a any) bool {
					s, _ := a.(string)
					return strings.HasPrefix(s, kubeDNSTopologyArg)
				})
			}
		}
		if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// syncPodsGone is done when no pod of the sync Deployment's ReplicaSets is
// left but on NotReady nodes (kube.PodsGone).
func syncPodsGone(env *engine.Env) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace)); err != nil {
			return false, "", fmt.Errorf("listing pods: %w", err)
		}
		ofSync := slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return !ofSyncDeployment(&p) })
		return kube.PodsGone(env, ofSync)(ctx)
	}
}

// ofSyncDeployment: p is a pod of the sync Deployment's ReplicaSets, found
// by its controller's name, as the Deployment and its ReplicaSets may be
// gone already while the pods still terminate.
func ofSyncDeployment(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "ReplicaSet" && p.Namespace == tunnelnodes.Namespace && strings.HasPrefix(ref.Name, syncDeployment+"-")
}
