package install

import (
	"context"
	"fmt"
	"strings"

	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// corefileStep writes the DaemonSet's own ConfigMap coredns-yurt: the stock
// Corefile with yurthosts. The stock coredns ConfigMap is never edited, so
// the stock Deployment is never handed a Corefile it cannot parse (stock
// CoreDNS crash-loops on yurthosts), whatever moment install or revert stops.
func corefileStep(l layout.Layout) Step {
	return corefileCopyStep("corefile", tunnelnodes.CoreDNSName, corednsYurtConfigMap, l.YurthostsOptions, "in the .:53 block")
}

// corefileCopyStep writes ConfigMap target: the Corefile of ConfigMap
// source with a yurthosts block of options added (where says where, in the
// summary). source is never edited; a change of it since install is
// carried over by install again, and status reports it as drifted.
func corefileCopyStep(name, source, target string, options []string, where string) Step {
	what := "yurthosts { " + strings.Join(options, "; ") + "; fallthrough } " + where
	// yurtCorefile is the source Corefile with the edit, as it is now.
	yurtCorefile := func(ctx context.Context, env *Env) (stock, yurt string, err error) {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, key(source), cm); err != nil {
			return "", "", fmt.Errorf("reading ConfigMap %s: %w", source, err)
		}
		stock, ok := cm.Data[corefileKey]
		if !ok {
			return "", "", fmt.Errorf("ConfigMap %s has no Corefile key", source)
		}
		yurt, _, err = EnsureYurthosts(stock, options)
		return stock, yurt, err
	}
	copyKey := "ConfigMap " + tunnelnodes.Namespace + "/" + target + " " + corefileKey
	yurtConfigMap := func(corefile string) *unstructured.Unstructured {
		return toUnstructured(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: target, Namespace: tunnelnodes.Namespace},
			Data:       map[string]string{corefileKey: corefile},
		}, "v1", "ConfigMap")
	}
	return Step{
		Name: name,
		Install: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			stock, want, err := yurtCorefile(ctx, env)
			if err != nil {
				return Result{}, err
			}
			created, _, err := ensureCreated(ctx, env, ss, yurtConfigMap(want))
			switch {
			case err != nil:
				return Result{}, err
			case created:
				// The diff that says what the copy is: the edit of the stock Corefile.
				diff := unifiedDiff(copyKey+" (from ConfigMap "+tunnelnodes.Namespace+"/"+source+")", []byte(stock), []byte(want))
				return Result{Changed: true, Diffs: []string{diff}, Summary: "ConfigMap " + tunnelnodes.Namespace + "/" + target +
					" created: the stock Corefile with " + what + " (the " + source + " ConfigMap is not edited)"}, nil
			}
			// It exists: carry over a change of the stock Corefile since.
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, key(target), cm); err != nil {
				return Result{}, fmt.Errorf("reading ConfigMap %s: %w", target, err)
			}
			if cm.Data[corefileKey] == want {
				return Result{Summary: "already applied"}, nil
			}
			diff := unifiedDiff(copyKey, []byte(cm.Data[corefileKey]), []byte(want))
			if !env.Options.DryRun {
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				cm.Data[corefileKey] = want
				if err := env.Client.Update(ctx, cm); err != nil {
					return Result{}, fmt.Errorf("updating ConfigMap %s: %w", target, err)
				}
			}
			return Result{Changed: true, Diffs: []string{diff}, Summary: "ConfigMap " + tunnelnodes.Namespace + "/" + target +
				" updated: carries over the stock Corefile's changes since install"}, nil
		},
		// The DaemonSet that read it is gone by now (revert runs backwards).
		Revert: func(ctx context.Context, env *Env, ss *stepState) (Result, error) {
			deleted, err := deleteCreated(ctx, env, ss, namedObject("v1", "ConfigMap", target))
			if err != nil || !deleted {
				return Result{Summary: "nothing to delete"}, err
			}
			return Result{Changed: true, Summary: "deleted ConfigMap " + tunnelnodes.Namespace + "/" + target}, nil
		},
		Status: func(ctx context.Context, env *Env, ss *stepState) (StepStatus, string, error) {
			cm := &corev1.ConfigMap{}
			err := env.Client.Get(ctx, key(target), cm)
			switch {
			case apierrors.IsNotFound(err) && ss.Applied:
				return Drifted, "ConfigMap " + target + " is missing", nil
			case apierrors.IsNotFound(err):
				return NotApplied, "", nil
			case err != nil:
				return "", "", err
			}
			_, want, err := yurtCorefile(ctx, env)
			switch {
			case err != nil:
				return Drifted, err.Error(), nil
			case cm.Data[corefileKey] != want:
				return Drifted, "the stock Corefile changed after install (run install again to carry it over into ConfigMap " + target + ")", nil
			}
			return Applied, "", nil
		},
	}
}

// The Corefile is edited through a parse tree that remembers where every
// directive starts and ends in the source, so an edit replaces or inserts
// exactly one span and leaves every other byte, comments included, alone.
