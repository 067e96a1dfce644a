package steps

import (
	"context"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// objectsStep applies a fixed set of objects (kube.Apply: created, or
// moved to this version's) and deletes them on revert.
func objectsStep(name string, objects func(context.Context, *engine.Env) ([]*unstructured.Unstructured, error)) engine.Step {
	return engine.Step{
		Name: name,
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			objs, err := objects(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			var res engine.Result
			var created, updated []string
			for _, o := range objs {
				applied, diff, err := kube.Apply(ctx, env, ss, o)
				switch {
				case err != nil:
					return engine.Result{}, err
				case applied == kube.Created:
					created = append(created, kube.ObjectKey(o))
				case applied == kube.Updated:
					updated = append(updated, kube.ObjectKey(o))
				}
				if applied != kube.Unchanged {
					res.Diffs = append(res.Diffs, diff)
				}
			}
			var summary []string
			if len(created) > 0 {
				summary = append(summary, "created "+strings.Join(created, ", "))
			}
			if len(updated) > 0 {
				summary = append(summary, "updated "+strings.Join(updated, ", "))
			}
			res.Changed = len(summary) > 0
			res.Summary = "already applied"
			if res.Changed {
				res.Summary = strings.Join(summary, "; ")
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
				return engine.Drifted, "not as this version installs: " + strings.Join(outdated, ", ") + " (run install to update them)", nil
			case ss.Applied:
				return engine.Drifted, "objects install created are missing", nil
			}
			return engine.NotApplied, "", nil
		},
	}
}
