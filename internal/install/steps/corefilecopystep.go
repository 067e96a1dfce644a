package steps

import (
	"context"
	"fmt"
	"strings"

	"github.com/yurtdns/yurtdns/internal/corefile"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/textedit"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// corefileCopyStep writes ConfigMap target: the Corefile of ConfigMap
// source with a yurthosts block of options added (where says where, in the
// summary). source is never edited; a change of it since install is
// carried over by install again, and status reports it as drifted.
func corefileCopyStep(name, source, target string, options []string, where string) engine.Step {
	what := "yurthosts { " + strings.Join(options, "; ") + "; fallthrough } " + where
	// yurtCorefile is the source Corefile with the edit, as it is now.
	yurtCorefile := func(ctx context.Context, env *engine.Env) (stock, yurt string, err error) {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, kube.Key(source), cm); err != nil {
			return "", "", fmt.Errorf("reading ConfigMap %s: %w", source, err)
		}
		stock, ok := cm.Data[kube.CorefileKey]
		if !ok {
			return "", "", fmt.Errorf("ConfigMap %s has no Corefile key", source)
		}
		yurt, _, err = corefile.EnsureYurthosts(stock, options)
		return stock, yurt, err
	}
	copyKey := "ConfigMap " + tunnelnodes.Namespace + "/" + target + " " + kube.CorefileKey
	yurtConfigMap := func(corefile string) *unstructured.Unstructured {
		return kube.ToUnstructured(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: target, Namespace: tunnelnodes.Namespace},
			Data:       map[string]string{kube.CorefileKey: corefile},
		}, "v1", "ConfigMap")
	}
	return engine.Step{
		Name: name,
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			stock, want, err := yurtCorefile(ctx, env)
			if err != nil {
				return engine.Result{}, err
			}
			created, _, err := kube.EnsureCreated(ctx, env, ss, yurtConfigMap(want))
			switch {
			case err != nil:
				return engine.Result{}, err
			case created:
				// The diff that says what the copy is: the edit of the stock Corefile.
				diff := textedit.UnifiedDiff(copyKey+" (from ConfigMap "+tunnelnodes.Namespace+"/"+source+")", []byte(stock), []byte(want))
				return engine.Result{Changed: true, Diffs: []string{diff}, Summary: "ConfigMap " + tunnelnodes.Namespace + "/" + target +
					" created: the stock Corefile with " + what + " (the " + source + " ConfigMap is not edited)"}, nil
			}
			// It exists: carry over a change of the stock Corefile since.
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, kube.Key(target), cm); err != nil {
				return engine.Result{}, fmt.Errorf("reading ConfigMap %s: %w", target, err)
			}
			if cm.Data[kube.CorefileKey] == want {
				return engine.Result{Summary: "already applied"}, nil
			}
			diff := textedit.UnifiedDiff(copyKey, []byte(cm.Data[kube.CorefileKey]), []byte(want))
			if !env.Options.DryRun {
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				cm.Data[kube.CorefileKey] = want
				if err := env.Client.Update(ctx, cm); err != nil {
					return engine.Result{}, fmt.Errorf("updating ConfigMap %s: %w", target, err)
				}
			}
			return engine.Result{Changed: true, Diffs: []string{diff}, Summary: "ConfigMap " + tunnelnodes.Namespace + "/" + target +
				" updated: carries over the stock Corefile's changes since install"}, nil
		},
		// The DaemonSet that read it is gone by now (revert runs backwards).
		Revert: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			deleted, err := kube.DeleteCreated(ctx, env, ss, kube.NamedObject("v1", "ConfigMap", target))
			if err != nil || !deleted {
				return engine.Result{Summary: "nothing to delete"}, err
			}
			return engine.Result{Changed: true, Summary: "deleted ConfigMap " + tunnelnodes.Namespace + "/" + target}, nil
		},
		Status: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
			cm := &corev1.ConfigMap{}
			err := env.Client.Get(ctx, kube.Key(target), cm)
			switch {
			case apierrors.IsNotFound(err) && ss.Applied:
				return engine.Drifted, "ConfigMap " + target + " is missing", nil
			case apierrors.IsNotFound(err):
				return engine.NotApplied, "", nil
			case err != nil:
				return "", "", err
			}
			_, want, err := yurtCorefile(ctx, env)
			switch {
			case err != nil:
				return engine.Drifted, err.Error(), nil
			case cm.Data[kube.CorefileKey] != want:
				return engine.Drifted, "the stock Corefile changed after install (run install again to carry it over into ConfigMap " + target + ")", nil
			}
			return engine.Applied, "", nil
		},
	}
}
