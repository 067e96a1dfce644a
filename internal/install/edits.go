package install

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// fieldEdit is a step's change to one value of one object (a ConfigMap
// key, an annotation, a replica count): read, compute, record, write.
type fieldEdit struct {
	key string // names the value in the state and in diffs
	get func(ctx context.Context, env *Env) (value string, exists bool, err error)
	// set writes value; exists false removes it.
	set     func(ctx context.Context, env *Env, value string, exists bool) error
	desired func(env *Env, current string, exists bool) (string, error)
}

// install makes the value desired, recording the value it had first.
// The record is saved before the write, so an interruption never loses it.
func (f fieldEdit) install(ctx context.Context, env *Env, ss *stepState) (changed bool, diff string, err error) {
	cur, exists, err := f.get(ctx, env)
	if err != nil {
		return false, "", err
	}
	next, err := f.desired(env, cur, exists)
	if err != nil {
		return false, "", err
	}
	if exists && next == cur {
		return false, "", nil
	}
	diff = unifiedDiff(f.key, []byte(cur), []byte(next))
	if env.Options.DryRun {
		return true, diff, nil
	}
	rec, had := ss.Records[f.key]
	if !had {
		rec = record{Before: cur, BeforeAbsent: !exists}
	}
	rec.After, rec.Restoring = next, false // a revert it follows is over
	ss.Records[f.key] = rec
	if err := ss.persist(ctx); err != nil {
		return false, "", err
	}
	return true, diff, f.set(ctx, env, next, true)
}

// revert restores the recorded value while the value is still what install
// wrote; a value changed since is the user's and stays.
func (f fieldEdit) revert(ctx context.Context, env *Env, ss *stepState) (changed bool, note string, err error) {
	rec, ok := ss.Records[f.key]
	if !ok {
		return false, "", nil
	}
	cur, exists, err := f.get(ctx, env)
	if err != nil {
		return false, "", err
	}
	if exists == !rec.BeforeAbsent && cur == rec.Before {
		return false, "", nil // still the original: install was interrupted before writing it
	}
	if !exists || cur != rec.After {
		return false, f.key + " changed since install: left as it is", nil
	}
	if env.Options.DryRun {
		return true, unifiedDiff(f.key, []byte(cur), []byte(rec.Before)), nil
	}
	rec.Restoring = true
	ss.Records[f.key] = rec
	if err := ss.persist(ctx); err != nil {
		return false, "", err
	}
	return true, "", f.set(ctx, env, rec.Before, !rec.BeforeAbsent)
}

// status: applied when the value is as install makes it; drifted when
// install had applied it and it has changed since.
func (f fieldEdit) status(ctx context.Context, env *Env, ss *stepState) (StepStatus, string, error) {
	cur, exists, err := f.get(ctx, env)
	if err != nil {
		// An object missing or unreadable is a state to report, not a failure of status.
		if ss.Applied {
			return Drifted, err.Error(), nil
		}
		return NotApplied, err.Error(), nil
	}
	next, err := f.desired(env, cur, exists)
	if err != nil {
		return Drifted, err.Error(), nil
	}
	if exists && next == cur {
		return Applied, "", nil
	}
	if ss.Applied {
		return Drifted, f.key + " was changed after install", nil
	}
	return NotApplied, "", nil
}

// objectKey names an object in the state and in diffs.
func objectKey(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

// ensureCreated creates obj when it does not exist. An existing object
// install did not create is never touched.
func ensureCreated(ctx context.Context, env *Env, ss *stepState, obj *unstructured.Unstructured) (changed bool, diff string, err error) {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(obj.GroupVersionKind())
	err = env.Client.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	if err == nil {
		if existing.GetLabels()[ManagedByLabel] != "yurtdns" {
			return false, "", fmt.Errorf("%s already exists and was not created by yurtdns: refusing to change it", objectKey(obj))
		}
		return false, "", nil
	}
	if !apierrors.IsNotFound(err) {
		return false, "", err
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedByLabel] = "yurtdns"
	obj.SetLabels(labels)
	rendered, _ := yaml.Marshal(obj.Object)
	diff = unifiedDiff(objectKey(obj), nil, rendered)
	if env.Options.DryRun {
		return true, diff, nil
	}
	ss.Records[objectKey(obj)] = record{Created: true}
	if err := ss.persist(ctx); err != nil {
		return false, "", err
	}
	return true, diff, env.Client.Create(ctx, obj)
}

// deleteCreated deletes what ensureCreated created.
func deleteCreated(ctx context.Context, env *Env, ss *stepState, obj *unstructured.Unstructured) (bool, error) {
	if rec, ok := ss.Records[objectKey(obj)]; !ok || !rec.Created {
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

// existsAll reports whether every object exists.
func existsAll(ctx context.Context, env *Env, objs []*unstructured.Unstructured) (bool, error) {
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
