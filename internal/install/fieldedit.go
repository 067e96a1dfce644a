package install

import (
	"context"
	"fmt"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// revertOutcome is what fieldEdit.revert found, and so did.
type revertOutcome int

const (
	// notRecorded: install recorded no change of the value; nothing to restore.
	notRecorded revertOutcome = iota
	// stillOriginal: the value is the one install found: install was
	// interrupted before its write (or a revert after its restoring write,
	// when the record says Restoring); nothing to restore.
	stillOriginal
	// restored: the original value is written back (in a dry run: would be).
	restored
	// changedSince: the value is neither the original nor what install
	// wrote: it was changed since install, and is left as it is.
	changedSince
)

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
// wrote; a value changed since is the user's and stays. diff is the
// restoring change, in a dry run.
func (f fieldEdit) revert(ctx context.Context, env *Env, ss *stepState) (outcome revertOutcome, diff string, err error) {
	rec, ok := ss.Records[f.key]
	if !ok {
		return notRecorded, "", nil
	}
	cur, exists, err := f.get(ctx, env)
	if err != nil {
		return notRecorded, "", err
	}
	if exists == !rec.BeforeAbsent && cur == rec.Before {
		return stillOriginal, "", nil
	}
	if !exists || cur != rec.After {
		return changedSince, "", nil
	}
	if env.Options.DryRun {
		return restored, unifiedDiff(f.key, []byte(cur), []byte(rec.Before)), nil
	}
	rec.Restoring = true
	ss.Records[f.key] = rec
	if err := ss.persist(ctx); err != nil {
		return notRecorded, "", err
	}
	return restored, "", f.set(ctx, env, rec.Before, !rec.BeforeAbsent)
}

// leftAsIs is the summary of a revert that found the value changed since install.
func (f fieldEdit) leftAsIs() string { return f.key + " changed since install: left as it is" }

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

// mapEntryEdit edits one entry of a string map of a kube-system object (a
// ConfigMap's data, a Service's annotations); stateKey names it.
func mapEntryEdit[T client.Object](stateKey, kind, name, entry string, newObject func() T, entries func(T) *map[string]string,
	desired func(*Env, string, bool) (string, error)) fieldEdit {
	read := func(ctx context.Context, env *Env) (T, error) {
		obj := newObject()
		return obj, env.Client.Get(ctx, key(name), obj)
	}
	return fieldEdit{
		key: stateKey,
		get: func(ctx context.Context, env *Env) (string, bool, error) {
			obj, err := read(ctx, env)
			if err != nil {
				return "", false, fmt.Errorf("reading %s %s: %w", kind, name, err)
			}
			v, ok := (*entries(obj))[entry]
			return v, ok, nil
		},
		set: func(ctx context.Context, env *Env, value string, exists bool) error {
			obj, err := read(ctx, env)
			if err != nil {
				return err
			}
			m := entries(obj)
			switch {
			case !exists:
				delete(*m, entry)
			case *m == nil:
				*m = map[string]string{entry: value}
			default:
				(*m)[entry] = value
			}
			return env.Client.Update(ctx, obj)
		},
		desired: desired,
	}
}

// configMapKeyEdit edits one key of a kube-system ConfigMap.
func configMapKeyEdit(name, dataKey string, desired func(*Env, string, bool) (string, error)) fieldEdit {
	return mapEntryEdit(fmt.Sprintf("ConfigMap %s/%s %s", tunnelnodes.Namespace, name, dataKey), "ConfigMap", name, dataKey,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func(cm *corev1.ConfigMap) *map[string]string { return &cm.Data }, desired)
}
