package install

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// objectsStep creates a fixed set of objects and deletes them on revert.
func objectsStep(name string, objects func(*Env) ([]*unstructured.Unstructured, error)) Step {
	return Step{
		Name: name,
		Install: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			objs, err := objects(env)
			if err != nil {
				return Result{}, err
			}
			var res Result
			var created []string
			for _, o := range objs {
				changed, diff, err := ensureCreated(ctx, env, ss, o)
				if err != nil {
					return Result{}, err
				}
				if changed {
					created = append(created, objectKey(o))
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
		Revert: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			objs, err := objects(env)
			if err != nil {
				return Result{}, err
			}
			var deleted []string
			for i := len(objs) - 1; i >= 0; i-- {
				ok, err := deleteCreated(ctx, env, ss, objs[i])
				if err != nil {
					return Result{}, err
				}
				if ok {
					deleted = append(deleted, objectKey(objs[i]))
				}
			}
			if len(deleted) == 0 {
				return Result{Summary: "nothing to delete"}, nil
			}
			return Result{Changed: true, Summary: "deleted " + strings.Join(deleted, ", ")}, nil
		},
		Status: func(ctx context.Context, env *Env, ss *stepState) (StepStatus, string, error) {
			objs, err := objects(env)
			if err != nil {
				return "", "", err
			}
			all, err := existsAll(ctx, env, objs)
			switch {
			case err != nil:
				return "", "", err
			case all:
				return Applied, "", nil
			case ss.Applied:
				return Drifted, "objects install created are missing", nil
			}
			return NotApplied, "", nil
		},
	}
}
