package kube

import (
	"context"
	"fmt"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/textedit"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// ToUnstructured converts a typed object for the generic create/delete helpers.
func ToUnstructured(obj runtime.Object, apiVersion, kind string) *unstructured.Unstructured {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err) // typed API objects always convert
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u
}

// NamedObject is a reference to an object for existence checks and deletes.
func NamedObject(apiVersion, kind, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(tunnelnodes.Namespace)
	u.SetName(name)
	return u
}

// ObjectKey names an object in the state and in diffs.
func ObjectKey(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

// EnsureCreated creates obj when it does not exist. An existing object
// install did not create is never touched.
func EnsureCreated(ctx context.Context, env *engine.Env, ss *engine.StepState, obj *unstructured.Unstructured) (changed bool, diff string, err error) {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(obj.GroupVersionKind())
	err = env.Client.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	if err == nil {
		if existing.GetLabels()[engine.ManagedByLabel] != "yurtdns" {
			return false, "", notOurs(obj)
		}
		return false, "", nil
	}
	if !apierrors.IsNotFound(err) {
		return false, "", err
	}
	return create(ctx, env, ss, obj, func(ctx context.Context, obj *unstructured.Unstructured) error {
		return env.Client.Create(ctx, obj)
	})
}

// create labels obj as install's, records it created (before the write, so
// that a revert after an interruption deletes it), and writes it.
func create(ctx context.Context, env *engine.Env, ss *engine.StepState, obj *unstructured.Unstructured,
	write func(context.Context, *unstructured.Unstructured) error) (changed bool, diff string, err error) {
	LabelManaged(obj)
	rendered, _ := yaml.Marshal(obj.Object)
	diff = textedit.UnifiedDiff(ObjectKey(obj), nil, rendered)
	if env.Options.DryRun {
		return true, diff, nil
	}
	ss.Records[ObjectKey(obj)] = engine.Record{Created: true}
	if err := ss.Persist(ctx); err != nil {
		return false, "", err
	}
	return true, diff, write(ctx, obj)
}

// LabelManaged labels obj as install's (what revert and Apply check before
// they touch an object).
func LabelManaged(obj *unstructured.Unstructured) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[engine.ManagedByLabel] = "yurtdns"
	obj.SetLabels(labels)
}

func notOurs(obj *unstructured.Unstructured) error {
	return fmt.Errorf("%s already exists and was not created by yurtdns: refusing to change it", ObjectKey(obj))
}

// DeleteCreated deletes what EnsureCreated created.
func DeleteCreated(ctx context.Context, env *engine.Env, ss *engine.StepState, obj *unstructured.Unstructured) (bool, error) {
	if rec, ok := ss.Records[ObjectKey(obj)]; !ok || !rec.Created {
		return false, nil
	}
	if env.Options.DryRun {
		return true, nil
	}
	err := env.Client.Delete(ctx, obj, client.PropagationPolicy("Background"))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// ExistsAll reports whether every object exists.
func ExistsAll(ctx context.Context, env *engine.Env, objs []*unstructured.Unstructured) (bool, error) {
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.GroupVersionKind())
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), u)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// contentFields are the fields that carry what an object of install's says,
// compared by Compare. Workloads are left out: their images come from
// install's flags, which status does not have.
var contentFields = []string{"data", "binaryData", "rules", "aggregationRule", "roleRef", "subjects"}

// Compare reads each of objs: missing names those that do not exist,
// outdated those that exist with content (contentFields) other than objs
// give them: an earlier version's, or edited since. Fields the server fills
// in are not differences (equality.Semantic.DeepDerivative).
func Compare(ctx context.Context, env *engine.Env, objs []*unstructured.Unstructured) (missing, outdated []string, err error) {
	for _, o := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), live)
		if apierrors.IsNotFound(err) {
			missing = append(missing, ObjectKey(o))
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, f := range contentFields {
			if want, ok := o.Object[f]; ok && !equality.Semantic.DeepDerivative(want, live.Object[f]) {
				outdated = append(outdated, ObjectKey(o))
				break
			}
		}
	}
	return missing, outdated, nil
}
