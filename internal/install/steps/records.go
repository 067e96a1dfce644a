package steps

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// recordsStep creates the shards' namespace and who may read and write
// them (deploy/records), first, so that coredns-yurt reads the shards as
// soon as the sync writes them. Its revert, last, deletes the namespace and
// with it the shards, and waits until it is gone: an install right after
// finds no namespace still terminating.
func recordsStep() engine.Step {
	step := objectsStep("records", func(context.Context, *engine.Env) ([]*unstructured.Unstructured, error) {
		return deploy.Render(deploy.Records)
	})
	install, revert, status := step.Install, step.Revert, step.Status
	step.Install = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
		if err := waitRecordsNamespaceGone(ctx, env, "a revert"); err != nil {
			return engine.Result{}, err
		}
		return install(ctx, env, ss)
	}
	step.Revert = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
		res, err := revert(ctx, env, ss)
		if err != nil || env.Options.DryRun {
			return res, err
		}
		return res, waitRecordsNamespaceGone(ctx, env, "this revert")
	}
	step.Status = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
		st, detail, err := status(ctx, env, ss)
		if err != nil || st != engine.Applied {
			return st, detail, err
		}
		detail, err = shardsStatus(ctx, env)
		return st, detail, err
	}
	return step
}

// waitRecordsNamespaceGone waits while the shards' namespace is terminating
// (by deleter's hand); one that is not being deleted is left as it is.
func waitRecordsNamespaceGone(ctx context.Context, env *engine.Env, deleter string) error {
	return kubewait.For(ctx, env.Options.Timeout, "namespace "+tunnelnodes.ShardsNamespace+" deleted by "+deleter+" still terminating",
		func(ctx context.Context) (bool, string, error) {
			ns := &corev1.Namespace{}
			err := env.Client.Get(ctx, types.NamespacedName{Name: tunnelnodes.ShardsNamespace}, ns)
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			if err != nil {
				return false, "", err
			}
			return ns.DeletionTimestamp == nil, "phase " + string(ns.Status.Phase), nil
		})
}

// shardsStatus says, per records ConfigMap, which shard set readers serve
// and whether the records still fit in the single ConfigMap (when they do
// not, the sync no longer writes it: its readers see stale records).
func shardsStatus(ctx context.Context, env *engine.Env) (string, error) {
	var cms corev1.ConfigMapList
	if err := env.Client.List(ctx, &cms, client.InNamespace(tunnelnodes.ShardsNamespace), client.HasLabels{tunnelnodes.RecordsOfLabel}); err != nil {
		return "", fmt.Errorf("listing shards: %w", err)
	}
	byRecords := map[string][]*corev1.ConfigMap{}
	for i := range cms.Items {
		cm := &cms.Items[i]
		byRecords[cm.Labels[tunnelnodes.RecordsOfLabel]] = append(byRecords[cm.Labels[tunnelnodes.RecordsOfLabel]], cm)
	}
	if len(byRecords) == 0 {
		return "no shards written yet", nil
	}
	var lines []string
	for records, shards := range byRecords {
		sets, _ := tunnelnodes.ShardSets(records, shards)
		served, ok := tunnelnodes.ServedShardSet(sets)
		if !ok {
			lines = append(lines, fmt.Sprintf("%s: no complete shard set (%d shards): readers serve the single ConfigMap", records, len(shards)))
			continue
		}
		size, names := 0, 0
		for _, cm := range served.Shards {
			if text := cm.Data[tunnelnodes.ConfigMapKey]; text != "" {
				size += len(text) + 1
				names += distinctNames(text) // a shard holds all of a name's lines
			}
		}
		fits := "fit in"
		if size-1 > tunnelnodes.MaxHostsBytes {
			fits = "are over 1 MiB: no longer written to"
		}
		plural := "s"
		if served.Count == 1 {
			plural = ""
		}
		lines = append(lines, fmt.Sprintf("%s: %d names in %d shard%s; the records %s the single ConfigMap", records, names, served.Count, plural, fits))
	}
	sort.Strings(lines)
	return strings.Join(lines, "; "), nil
}

// distinctNames counts the names of a hosts text: a dual-stack cloud node
// has a line per family.
func distinctNames(text string) int {
	entries, _ := tunnelnodes.ParseHosts(text)
	names := map[string]struct{}{}
	for _, e := range entries {
		names[e.Name] = struct{}{}
	}
	return len(names)
}
