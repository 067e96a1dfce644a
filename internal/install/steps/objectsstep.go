package steps

import (
	"context"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// objectsStep creates a fixed set of objects and deletes them on revert.
func objectsStep(name string, objects func(context.Context, *engine.Env) ([]*unstructured.Unstructured, error)) engine.Step {
	return engine.Step{
		Name: name,
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			objs, err := objects(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			var res engine.Result
			var created []string
			for _, o := range objs {
				changed, diff, err := kube.EnsureCreated(ctx, env, ss, o)
				if err != nil {
					return engine.Result{}, err
				}
				if changed {
					created = append(created, kube.ObjectKey(o))
					res.Diffs = append(res.Diffs, diff)
				}
			}
			res.Changed = len(created) > 0
			res.Summary = "already applied"
			if res.Changed {
				res.Summary = "created " + strings.Join(created, ", ")
			}
			return res, nil
		},
		Revert: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			objs, err := objects(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			var deleted []string
			for i := len(objs) - 1; i >= 0; i-- {
				ok, err := kube.DeleteCreated(ctx, env, ss, objs[i])
				if err != nil {
					return engine.Result{}, err
				}
				if ok {
					deleted = append(deleted, kube.ObjectKey(objs[i]))
				}
			}
			if len(deleted) == 0 {
				return engine.Result{Summary: "nothing to delete"}, nil
			}
			return engine.Result{Changed: true, Summary: "deleted " + strings.Join(deleted, ", ")}, nil
		},
		Status: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
			objs, err := objects(ctx, env)
			if err != nil {
				return "", "", err
			}
			missing, outdated, err := kube.Compare(ctx, env, objs)
			switch {
			case err != nil:
				return "", "", err
			case len(missing) == 0 && len(outdated) == 0:
				return engine.Applied, "", nil
			case len(missing) == 0:
				// install creates and never rewrites: an object from an
				// earlier version stays as it was until revert deletes it.
				return engine.Drifted, "not as this version installs: " + strings.Join(outdated, ", ") + " (run revert, then install, to replace)", nil
			case ss.Applied:
				return engine.Drifted, "objects install created are missing", nil
			}
			return engine.NotApplied, "", nil
		},
	}
}
