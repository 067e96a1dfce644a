package kube

import (
	"context"
	"fmt"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/textedit"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// FieldManager owns, by server-side apply, every field install sets on the
// objects it owns: an install of a later version moves them to its own and
// leaves the fields other writers set.
const FieldManager = "yurtdns"

// InstallUserAgent is install's, revert's and status's user agent: the
// apiserver names the field manager of a plain create or update after it.
const InstallUserAgent = "tunnel-nodes-sync-install"

// createManagers are the field managers of the plain creates with which
// versions before v0.1.0 made install's objects.
var createManagers = sets.New(InstallUserAgent)

// Applied is what Apply did.
type Applied int

const (
	Unchanged Applied = iota
	Created
	Updated
)

// Apply makes obj as this version installs it: created when it does not
// exist (as EnsureCreated), else server-side applied under FieldManager
// when that changes it, with diff as kubectl diff shows it. An existing
// object install did not create is never touched.
func Apply(ctx context.Context, env *engine.Env, ss *engine.StepState, obj *unstructured.Unstructured) (Applied, string, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), live)
	if apierrors.IsNotFound(err) {
		_, diff, err := create(ctx, env, ss, obj, serverSideApply(env))
		if err != nil {
			return Unchanged, "", err
		}
		return Created, diff, nil
	}
	if err != nil {
		return Unchanged, "", err
	}
	if live.GetLabels()[engine.ManagedByLabel] != "yurtdns" {
		return Unchanged, "", notOurs(obj)
	}
	applied := obj.DeepCopy()
	LabelManaged(applied)

	// An earlier version's create owns the fields it set: taken over, so
	// that a field this version no longer sets is removed, not left behind.
	if !env.Options.DryRun {
		patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, createManagers, FieldManager)
		if err != nil {
			return Unchanged, "", fmt.Errorf("%s: taking over an earlier version's fields: %w", ObjectKey(obj), err)
		}
		if patch != nil {
			if err := env.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
				return Unchanged, "", fmt.Errorf("%s: taking over an earlier version's fields: %w", ObjectKey(obj), err)
			}
		}
	}

	// What the apply would make of it, to write only a change.
	result := applied.DeepCopy()
	if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(result), client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
		return Unchanged, "", fmt.Errorf("applying %s (dry run): %w", ObjectKey(obj), err)
	}
	before, after := comparable(live), comparable(result)
	if string(before) == string(after) {
		return Unchanged, "", nil
	}
	diff := textedit.UnifiedDiff(ObjectKey(obj), before, after)
	if env.Options.DryRun {
		return Updated, diff, nil
	}
	if err := serverSideApply(env)(ctx, applied); err != nil {
		return Unchanged, "", err
	}
	return Updated, diff, nil
}

// apply server-side applies obj under FieldManager, taking over fields
// another manager set to other values: install's own values win.
func serverSideApply(env *engine.Env) func(context.Context, *unstructured.Unstructured) error {
	return func(ctx context.Context, obj *unstructured.Unstructured) error {
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", ObjectKey(obj), err)
		}
		return nil
	}
}

// comparable is o as YAML without what every write changes, so that two
// reads differ only where the object does.
func comparable(o *unstructured.Unstructured) []byte {
	c := o.DeepCopy()
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	out, _ := yaml.Marshal(c.Object)
	return out
}
