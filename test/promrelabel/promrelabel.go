// Package promrelabel computes the address Prometheus scrapes for a
// ServiceMonitor endpoint's target, with Prometheus's own relabel code
// (github.com/prometheus/prometheus/model/relabel). It is a module of its
// own: that module would upgrade half of the main module's dependencies.
package promrelabel

import (
	"fmt"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"go.yaml.in/yaml/v2"
)

// The ServiceMonitor fields of a relabeling, as prometheus-operator writes
// them into Prometheus's configuration.
var configKeys = map[string]string{
	"sourceLabels": "source_labels", "separator": "separator", "targetLabel": "target_label",
	"regex": "regex", "modulus": "modulus", "replacement": "replacement", "action": "action",
}

// Configs converts a ServiceMonitor endpoint's relabelings into Prometheus's
// relabel configs: the fields renamed, the action lowercased as
// prometheus-operator does, Prometheus's defaults for the fields not set.
func Configs(relabelings []any) ([]*relabel.Config, error) {
	var cfgs []*relabel.Config
	for i, r := range relabelings {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("relabeling %d is not an object", i)
		}
		conf := map[string]any{}
		for k, v := range m {
			key, ok := configKeys[k]
			if !ok {
				return nil, fmt.Errorf("relabeling %d: unknown field %q", i, k)
			}
			if k == "action" {
				v = strings.ToLower(fmt.Sprint(v))
			}
			conf[key] = v
		}
		b, err := yaml.Marshal(conf)
		if err != nil {
			return nil, err
		}
		cfg := &relabel.Config{}
		if err := yaml.UnmarshalStrict(b, cfg); err != nil {
			return nil, fmt.Errorf("relabeling %d: %w", i, err)
		}
		if err := cfg.Validate(model.UTF8Validation); err != nil {
			return nil, fmt.Errorf("relabeling %d: %w", i, err)
		}
		cfgs = append(cfgs, cfg)
	}
	return cfgs, nil
}

// Address is the __address__ of a target with the discovery labels
// discovered after the endpoint's relabelings (the "relabelings" of one
// element of a ServiceMonitor's spec.endpoints); kept false when they drop it.
func Address(endpoint map[string]any, discovered map[string]string) (address string, kept bool, err error) {
	target, kept, err := Relabel(endpoint, discovered)
	return target[model.AddressLabel], kept, err
}

// Relabel is the labels of a target with the discovery labels discovered
// after the endpoint's relabelings (of a ServiceMonitor's or a PodMonitor's
// endpoint); kept false when they drop it.
func Relabel(endpoint map[string]any, discovered map[string]string) (target map[string]string, kept bool, err error) {
	var relabelings []any
	if r, ok := endpoint["relabelings"]; ok && r != nil {
		if relabelings, ok = r.([]any); !ok {
			return nil, false, fmt.Errorf("relabelings is not a list")
		}
	}
	cfgs, err := Configs(relabelings)
	if err != nil {
		return nil, false, err
	}
	lb := labels.NewBuilder(labels.FromMap(discovered))
	if !relabel.ProcessBuilder(lb, cfgs...) {
		return nil, false, nil
	}
	return lb.Labels().Map(), true, nil
}
