package kube

import (
	"context"
	"fmt"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/textedit"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldEdit is a step's change to one value of one object (a ConfigMap
// key, an annotation, a replica count): read, compute, record, write.
type FieldEdit struct {
	Key string // names the value in the state and in diffs
	Get func(ctx context.Context, env *engine.Env) (value string, exists bool, err error)
	// set writes value; exists false removes it.
	Set     func(ctx context.Context, env *engine.Env, value string, exists bool) error
	Desired func(env *engine.Env, current string, exists bool) (string, error)
	// Undo, when set, takes install's change out of a value that changed
	// since install wrote it (kubeadm upgrade re-marshals what it uploads
	// again): the value as it is now, with what install set put back as
	// rec.Before had it. Revert then restores structurally, not only byte
	// for byte.
	Undo func(env *engine.Env, current string, rec engine.Record) (string, error)
}

// revertOutcome is what FieldEdit.Revert found, and so did.
type revertOutcome int

const (
	// notRecorded: install recorded no change of the value; nothing to restore.
	notRecorded revertOutcome = iota
	// StillOriginal: the value is the one install found: install was
	// interrupted before its write (or a revert after its restoring write,
	// when the record says Restoring); nothing to restore.
	StillOriginal
	// Restored: the original value is written back (in a dry run: would be).
	Restored
	// ChangedSince: the value is neither the original nor what install
	// wrote: it was changed since install, and is left as it is.
	ChangedSince
)

// Install makes the value desired, recording the value it had first.
// The record is saved before the write, so an interruption never loses it.
func (f FieldEdit) Install(ctx context.Context, env *engine.Env, ss *engine.StepState) (changed bool, diff string, err error) {
	cur, exists, err := f.Get(ctx, env)
	if err != nil {
		return false, "", err
	}
	next, err := f.Desired(env, cur, exists)
	if err != nil {
		return false, "", err
	}
	if exists && next == cur {
		return false, "", nil
	}
	diff = textedit.UnifiedDiff(f.Key, []byte(cur), []byte(next))
	if env.Options.DryRun {
		return true, diff, nil
	}
	rec, had := ss.Records[f.Key]
	switch {
	case !had:
		rec = engine.Record{Before: cur, BeforeAbsent: !exists}
	case f.Undo != nil && exists && cur != rec.After && cur != rec.Before:
		// Changed since the first install (an upgrade rendered it anew): what
		// revert restores is the value now, without install's change, never
		// an older version's.
		if rec.Before, err = f.Undo(env, cur, rec); err != nil {
			return false, "", err
		}
		rec.BeforeAbsent = false
	}
	rec.After, rec.Restoring = next, false // a revert it follows is over
	ss.Records[f.Key] = rec
	if err := ss.Persist(ctx); err != nil {
		return false, "", err
	}
	return true, diff, f.Set(ctx, env, next, true)
}

// Revert restores the recorded value while the value is still what install
// wrote; a value changed since is the user's and stays. diff is the
// restoring change, in a dry run.
func (f FieldEdit) Revert(ctx context.Context, env *engine.Env, ss *engine.StepState) (outcome revertOutcome, diff string, err error) {
	rec, ok := ss.Records[f.Key]
	if !ok {
		return notRecorded, "", nil
	}
	cur, exists, err := f.Get(ctx, env)
	if err != nil {
		return notRecorded, "", err
	}
	if exists == !rec.BeforeAbsent && cur == rec.Before {
		return StillOriginal, "", nil
	}
	next, nextExists := rec.Before, !rec.BeforeAbsent
	if !exists || cur != rec.After {
		if f.Undo == nil || !exists {
			return ChangedSince, "", nil
		}
		if next, err = f.Undo(env, cur, rec); err != nil {
			return notRecorded, "", err
		}
		if next == cur {
			return ChangedSince, "", nil
		}
		nextExists = true
	}
	if env.Options.DryRun {
		return Restored, textedit.UnifiedDiff(f.Key, []byte(cur), []byte(next)), nil
	}
	rec.Restoring = true
	ss.Records[f.Key] = rec
	if err := ss.Persist(ctx); err != nil {
		return notRecorded, "", err
	}
	return Restored, "", f.Set(ctx, env, next, nextExists)
}

// LeftAsIs is the summary of a revert that found the value changed since install.
func (f FieldEdit) LeftAsIs() string { return f.Key + " changed since install: left as it is" }

// Status: applied when the value is as install makes it; drifted when
// install had applied it and it has changed since.
func (f FieldEdit) Status(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
	cur, exists, err := f.Get(ctx, env)
	if err != nil {
		// An object missing or unreadable is a state to report, not a failure of status.
		if ss.Applied {
			return engine.Drifted, err.Error(), nil
		}
		return engine.NotApplied, err.Error(), nil
	}
	next, err := f.Desired(env, cur, exists)
	if err != nil {
		return engine.Drifted, err.Error(), nil
	}
	if exists && next == cur {
		return engine.Applied, "", nil
	}
	if ss.Applied {
		return engine.Drifted, f.Key + " was changed after install", nil
	}
	return engine.NotApplied, "", nil
}

// MapEntryEdit edits one entry of a string map of a kube-system object (a
// ConfigMap's data, a Service's annotations); stateKey names it.
func MapEntryEdit[T client.Object](stateKey, kind, name, entry string, newObject func() T, entries func(T) *map[string]string,
	desired func(*engine.Env, string, bool) (string, error)) FieldEdit {
	read := func(ctx context.Context, env *engine.Env) (T, error) {
		obj := newObject()
		return obj, env.Client.Get(ctx, Key(name), obj)
	}
	return FieldEdit{
		Key: stateKey,
		Get: func(ctx context.Context, env *engine.Env) (string, bool, error) {
			obj, err := read(ctx, env)
			if err != nil {
				return "", false, fmt.Errorf("reading %s %s: %w", kind, name, err)
			}
			v, ok := (*entries(obj))[entry]
			return v, ok, nil
		},
		Set: func(ctx context.Context, env *engine.Env, value string, exists bool) error {
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
		Desired: desired,
	}
}

// ConfigMapKeyEdit edits one key of a kube-system ConfigMap.
func ConfigMapKeyEdit(name, dataKey string, desired func(*engine.Env, string, bool) (string, error)) FieldEdit {
	return MapEntryEdit(fmt.Sprintf("ConfigMap %s/%s %s", tunnelnodes.Namespace, name, dataKey), "ConfigMap", name, dataKey,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func(cm *corev1.ConfigMap) *map[string]string { return &cm.Data }, desired)
}
