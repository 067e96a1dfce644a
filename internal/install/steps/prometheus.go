package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The prometheus step: Prometheus scrapes the kubelet and node-exporter of
// a node by its name (which cluster DNS resolves to the tunnel for edge
// nodes), as the OpenYurt DNS-mode guide does by hand. ServiceMonitors are
// handled unstructured: an update through typed structs of one
// prometheus-operator version would drop fields a newer CRD has.

// kube-prometheus's ServiceMonitors, the defaults of the step's flags.
const (
	DefaultKubeletServiceMonitor      = "monitoring/kubelet"
	DefaultNodeExporterServiceMonitor = "monitoring/node-exporter"
)

// The discovery labels that hold the node name: the kubelet Endpoints
// prometheus-operator writes point at their Node (targetRef), and
// node-exporter runs one pod per node.
const (
	KubeletNodeNameLabel      = "__meta_kubernetes_endpoint_address_target_name"
	NodeExporterNodeNameLabel = "__meta_kubernetes_pod_node_name"
)

var serviceMonitorGVK = struct{ APIVersion, Kind string }{"monitoring.coreos.com/v1", "ServiceMonitor"}

// NodeNameRelabeling is the ServiceMonitor relabeling that replaces the
// host of __address__ with the node name in nodeNameLabel, keeping the port
// (IPv6 "[fd00::1]:10250" too); a target without a node name is left as it is.
func NodeNameRelabeling(nodeNameLabel string) map[string]any {
	return map[string]any{
		"action":       "replace",
		"sourceLabels": []any{nodeNameLabel, "__address__"},
		"separator":    ";",
		"regex":        "([^;]+);.*:([0-9]+)",
		"replacement":  "$1:$2",
		"targetLabel":  "__address__",
	}
}

// ParseNamespacedName parses NAMESPACE/NAME.
func ParseNamespacedName(s string) (client.ObjectKey, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, fmt.Errorf("%q: want NAMESPACE/NAME", s)
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}

// serviceMonitorTarget is one ServiceMonitor the step relabels.
type serviceMonitorTarget struct {
	ref           string // NAMESPACE/NAME
	nodeNameLabel string
}

func serviceMonitorTargets(o engine.Options) []serviceMonitorTarget {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	return []serviceMonitorTarget{
		{or(o.KubeletServiceMonitor, DefaultKubeletServiceMonitor), KubeletNodeNameLabel},
		{or(o.NodeExporterServiceMonitor, DefaultNodeExporterServiceMonitor), NodeExporterNodeNameLabel},
	}
}

const serviceMonitorKeyPrefix = "ServiceMonitor "

// serviceMonitorEdit edits the relabelings of every endpoint of one
// ServiceMonitor. The value is their YAML list (null for an endpoint
// without relabelings), so revert puts back exactly what was there.
func serviceMonitorEdit(ref, nodeNameLabel string) kube.FieldEdit {
	return kube.FieldEdit{
		Key: serviceMonitorKeyPrefix + ref + " spec.endpoints[*].relabelings",
		Get: func(ctx context.Context, env *engine.Env) (string, bool, error) {
			sm, err := getServiceMonitor(ctx, env, ref)
			if err != nil {
				return "", false, err
			}
			v, err := endpointRelabelings(sm)
			return v, true, err
		},
		Set: func(ctx context.Context, env *engine.Env, value string, _ bool) error {
			sm, err := getServiceMonitor(ctx, env, ref)
			if err != nil {
				return err
			}
			if err := setEndpointRelabelings(sm, value); err != nil {
				return fmt.Errorf("ServiceMonitor %s: %w", ref, err)
			}
			return env.Client.Update(ctx, sm) // resourceVersion as read: a concurrent change is a conflict, not lost
		},
		Desired: func(_ *engine.Env, cur string, _ bool) (string, error) {
			return withRelabeling(cur, NodeNameRelabeling(nodeNameLabel))
		},
	}
}

func getServiceMonitor(ctx context.Context, env *engine.Env, ref string) (*unstructured.Unstructured, error) {
	k, err := ParseNamespacedName(ref)
	if err != nil {
		return nil, fmt.Errorf("ServiceMonitor %w", err)
	}
	sm := &unstructured.Unstructured{}
	sm.SetAPIVersion(serviceMonitorGVK.APIVersion)
	sm.SetKind(serviceMonitorGVK.Kind)
	if err := env.Client.Get(ctx, k, sm); err != nil {
		return nil, fmt.Errorf("reading ServiceMonitor %s: %w", ref, err)
	}
	return sm, nil
}

// absentReason says why a ServiceMonitor is not there to edit ("" when it is).
func absentReason(ctx context.Context, env *engine.Env, ref string) (string, error) {
	_, err := getServiceMonitor(ctx, env, ref)
	switch {
	case err == nil:
		return "", nil
	case meta.IsNoMatchError(err):
		return "no ServiceMonitor CRD (" + serviceMonitorGVK.APIVersion + "): prometheus-operator is not installed", nil
	case apierrors.IsNotFound(err):
		return "ServiceMonitor " + ref + " not found", nil
	}
	return "", err
}

// endpointRelabelings renders each endpoint's relabelings.
func endpointRelabelings(sm *unstructured.Unstructured) (string, error) {
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if err != nil {
		return "", err
	}
	lists := make([]any, len(endpoints))
	for i, e := range endpoints {
		if m, ok := e.(map[string]any); ok {
			lists[i] = m["relabelings"]
		}
	}
	b, err := yaml.Marshal(lists)
	return string(b), err
}

func parseRelabelings(value string) ([]any, error) {
	j, err := yaml.YAMLToJSON([]byte(value))
	if err != nil {
		return nil, err
	}
	var lists []any
	// utiljson: integers as int64, as unstructured content needs.
	return lists, utiljson.Unmarshal(j, &lists)
}

// setEndpointRelabelings writes a value endpointRelabelings rendered.
func setEndpointRelabelings(sm *unstructured.Unstructured, value string) error {
	lists, err := parseRelabelings(value)
	if err != nil {
		return err
	}
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if err != nil {
		return err
	}
	if len(endpoints) != len(lists) {
		return fmt.Errorf("it has %d endpoints, the relabelings are for %d: it changed meanwhile", len(endpoints), len(lists))
	}
	for i, e := range endpoints {
		m, ok := e.(map[string]any)
		if !ok {
			return fmt.Errorf("endpoint %d is not an object", i)
		}
		if lists[i] == nil {
			delete(m, "relabelings")
		} else {
			m["relabelings"] = lists[i]
		}
	}
	return unstructured.SetNestedSlice(sm.Object, endpoints, "spec", "endpoints")
}

// withRelabeling appends rule to every endpoint's relabelings that lacks
// it: last, so that it sees the address the other rules leave.
func withRelabeling(value string, rule map[string]any) (string, error) {
	lists, err := parseRelabelings(value)
	if err != nil {
		return "", err
	}
	want, _ := json.Marshal(rule)
	for i, l := range lists {
		list, ok := l.([]any)
		if l != nil && !ok {
			return "", fmt.Errorf("endpoint %d: relabelings is not a list", i)
		}
		if !slices.ContainsFunc(list, func(r any) bool { b, _ := json.Marshal(r); return string(b) == string(want) }) {
			lists[i] = append(list, rule)
		}
	}
	b, err := yaml.Marshal(lists)
	return string(b), err
}

// prometheusStep adds NodeNameRelabeling to the kubelet's and
// node-exporter's ServiceMonitors, each where it exists.
func prometheusStep() engine.Step {
	return engine.Step{
		Name: "prometheus",
		Install: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			var res engine.Result
			var done, absent []string
			present := 0
			for _, t := range serviceMonitorTargets(env.Options) {
				reason, err := absentReason(ctx, env, t.ref)
				if err != nil {
					return engine.Result{}, err
				}
				if reason != "" {
					if !slices.Contains(absent, reason) { // "no CRD" once
						absent = append(absent, reason)
					}
					continue
				}
				present++
				changed, diff, err := serviceMonitorEdit(t.ref, t.nodeNameLabel).Install(ctx, env, ss)
				if err != nil {
					return engine.Result{}, err
				}
				if changed {
					res.Changed = true
					res.Diffs = append(res.Diffs, diff)
					done = append(done, t.ref)
				}
			}
			switch {
			case present == 0:
				return engine.Result{Skipped: true, Summary: "skipped: " + strings.Join(absent, "; ")}, nil
			case res.Changed:
				res.Summary = "ServiceMonitor " + strings.Join(done, ", ") + ": targets scraped by node name (__address__ relabelled)"
			default:
				res.Summary = "already applied"
			}
			if len(absent) > 0 {
				res.Summary += " (" + strings.Join(absent, "; ") + ")"
			}
			return res, nil
		},
		Revert: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
			// The ServiceMonitors install edited, from its records: the flags may differ now.
			var res engine.Result
			var notes []string
			for _, k := range slices.Sorted(maps.Keys(ss.Records)) {
				ref, _, _ := strings.Cut(strings.TrimPrefix(k, serviceMonitorKeyPrefix), " ")
				edit := serviceMonitorEdit(ref, "")
				if reason, err := absentReason(ctx, env, ref); err != nil || reason != "" {
					if err != nil {
						return engine.Result{}, err
					}
					notes = append(notes, reason+": nothing to restore")
					continue
				}
				outcome, diff, err := edit.Revert(ctx, env, ss)
				if err != nil {
					return engine.Result{}, err
				}
				switch outcome {
				case kube.Restored:
					res.Changed = true
					notes = append(notes, "restored "+edit.Key)
					if diff != "" {
						res.Diffs = append(res.Diffs, diff)
					}
				case kube.ChangedSince:
					notes = append(notes, edit.LeftAsIs())
				}
			}
			res.Summary = "nothing to restore"
			if len(notes) > 0 {
				res.Summary = strings.Join(notes, "; ")
			}
			return res, nil
		},
		Status: func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.StepStatus, string, error) {
			status, present, applied := engine.NotApplied, 0, 0
			var details []string
			for _, t := range serviceMonitorTargets(env.Options) {
				reason, err := absentReason(ctx, env, t.ref)
				if err != nil {
					return "", "", err
				}
				if reason != "" {
					details = append(details, reason)
					continue
				}
				present++
				s, detail, err := serviceMonitorEdit(t.ref, t.nodeNameLabel).Status(ctx, env, ss)
				if err != nil {
					return "", "", err
				}
				if detail != "" {
					details = append(details, detail)
				}
				switch s {
				case engine.Drifted:
					status = engine.Drifted
				case engine.Applied:
					applied++
				}
			}
			if status != engine.Drifted && present > 0 && applied == present {
				status = engine.Applied
			}
			detail := strings.Join(slices.Compact(details), "; ")
			if present == 0 {
				// Said as the kube-proxy step says it: install skips this step here.
				detail = "skipped by install: " + detail
			}
			return status, detail, nil
		},
	}
}

// AddNodeNameRelabeling makes sm what the prometheus step makes it: every
// endpoint ends with NodeNameRelabeling(nodeNameLabel). For tests that check
// the result with Prometheus's own relabel code.
func AddNodeNameRelabeling(sm *unstructured.Unstructured, nodeNameLabel string) error {
	cur, err := endpointRelabelings(sm)
	if err != nil {
		return err
	}
	next, err := withRelabeling(cur, NodeNameRelabeling(nodeNameLabel))
	if err != nil {
		return err
	}
	return setEndpointRelabelings(sm, next)
}
