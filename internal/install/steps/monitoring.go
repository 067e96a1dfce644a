package steps

import (
	"context"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// monitoringStep creates the PodMonitors and PrometheusRule of the
// kustomization dir of deploy/ (deploy/monitoring, or a layout's variant
// whose PodMonitors select its pods) and deletes them on revert, each only
// where the cluster serves its prometheus-operator CRD: without any, the
// step is skipped, as the prometheus step is.
func monitoringStep(dir string) engine.Step {
	step := objectsStep("monitoring", func(_ context.Context, env *engine.Env) ([]*unstructured.Unstructured, error) {
		served, _, err := monitoringObjects(env, dir)
		return served, err
	})
	install, status := step.Install, step.Status
	step.Install = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
		served, absent, err := monitoringObjects(env, dir)
		if err != nil {
			return engine.Result{}, err
		}
		if len(served) == 0 {
			return engine.Result{Skipped: true, Summary: "skipped: " + absent}, nil
		}
		res, err := install(ctx, env, ss)
		if err == nil && absent != "" {
			res.Summary += " (" + absent + ")"
		}
		return res, err
	}
	step.Status = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
		served, absent, err := monitoringObjects(env, dir)
		switch {
		case err != nil:
			return "", "", err
		case len(served) == 0:
			// Said as the prometheus step says it.
			return engine.NotApplied, "skipped by install: " + absent, nil
		}
		st, detail, err := status(ctx, env, ss)
		if absent != "" {
			detail = strings.TrimPrefix(detail+"; "+absent, "; ")
		}
		return st, detail, err
	}
	// Revert needs nothing more: an object whose CRD is gone went with it.
	return step
}

// monitoringObjects renders dir into the objects whose kind the cluster
// serves and, when some are not, the reason they are left out.
func monitoringObjects(env *engine.Env, dir string) (served []*unstructured.Unstructured, absent string, err error) {
	objs, err := deploy.Render(dir)
	if err != nil {
		return nil, "", err
	}
	var missing []string
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		_, err := env.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case meta.IsNoMatchError(err):
			if !slices.Contains(missing, gvk.Kind) {
				missing = append(missing, gvk.Kind)
			}
		case err != nil:
			return nil, "", err
		default:
			served = append(served, o)
		}
	}
	if len(missing) > 0 {
		absent = "no " + strings.Join(missing, " or ") + " CRD (" + serviceMonitorGVK.APIVersion + "): prometheus-operator is not installed"
	}
	return served, absent, nil
}
