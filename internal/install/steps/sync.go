package steps

import (
	"context"
	"fmt"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// syncDeployment is deploy/'s tunnel-nodes-sync Deployment, both profiles.
const syncDeployment = "tunnel-nodes-sync"

// syncStep deploys tunnel-nodes-sync from the kustomization dir of deploy/
// and waits for it to roll out: a Ready replica has synced its caches, so
// the records follow the nodes from the moment install returns.
func syncStep(name, dir string) engine.Step {
	step := objectsStep(name, func(_ context.Context, env *engine.Env) ([]*unstructured.Unstructured, error) {
		objs, err := deploy.Render(dir)
		if err != nil {
			return nil, err
		}
		if env.Options.SyncImage != "" {
			for _, o := range objs {
				if o.GetKind() != "Deployment" {
					continue
				}
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				for _, c := range containers {
					c.(map[string]any)["image"] = env.Options.SyncImage
				}
				if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
					return nil, err
				}
			}
		}
		return objs, nil
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
		return res, nil
	}
	revert := step.Revert
	step.Revert = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
		res, err := revert(ctx, env, ss)
		if err != nil || env.Options.DryRun || !res.Changed {
			return res, err
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
