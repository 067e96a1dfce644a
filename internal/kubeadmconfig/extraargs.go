// Package kubeadmconfig edits the component flags kubeadm's
// ClusterConfiguration carries (apiServer.extraArgs,
// controllerManager.extraArgs), as kept in the kube-system/kubeadm-config
// ConfigMap: kubeadm upgrade, `init phase control-plane` and `join
// --control-plane` render the static pods from it, so a flag set there
// survives them, where one set only in a manifest does not.
package kubeadmconfig

import (
	"fmt"

	"github.com/yurtdns/yurtdns/internal/textedit"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The ConfigMap and key kubeadm keeps its ClusterConfiguration in.
const (
	ConfigMap = "kubeadm-config"
	Key       = "ClusterConfiguration"
)

// The ClusterConfiguration fields of the components whose flags install sets.
const (
	APIServer         = "apiServer"
	ControllerManager = "controllerManager"
)

// maxConfig bounds what is parsed: kubeadm's is about 1 KiB.
const maxConfig = 1 << 20

// Arg is one flag of one component: --Name=Value.
type Arg struct {
	Component, Name, Value string
}

// ExtraArg reads component's extraArgs entry name: v1beta4's list of
// {name, value} (the last entry of a name wins, as in kubeadm) or v1beta3's
// map.
func ExtraArg(text, component, name string) (value string, ok bool, err error) {
	n, err := parse(text)
	if err != nil {
		return "", false, err
	}
	return extraArg(n, component, name)
}

// SetExtraArgs returns the ClusterConfiguration with each arg set,
// everything else as it was (order and comments kept).
func SetExtraArgs(text string, args []Arg) (string, error) {
	n, err := parse(text)
	if err != nil {
		return "", err
	}
	for _, a := range args {
		if err := setExtraArg(n, a.Component, a.Name, a.Value, true); err != nil {
			return "", err
		}
	}
	return n.String()
}

// UnsetExtraArgs takes args out of text where they still have the value
// install set: each gets the value it has in before, or goes when before
// has none (an extraArgs left empty goes too, as kubeadm omits it).
// An arg changed since is left as it is. before may be "" (no
// ClusterConfiguration then).
func UnsetExtraArgs(text string, args []Arg, before string) (string, error) {
	n, err := parse(text)
	if err != nil {
		return "", err
	}
	var was *yaml.RNode
	if before != "" {
		if was, err = parse(before); err != nil {
			return "", fmt.Errorf("the recorded ClusterConfiguration: %w", err)
		}
	}
	for _, a := range args {
		cur, ok, err := extraArg(n, a.Component, a.Name)
		if err != nil {
			return "", err
		}
		if !ok || cur != a.Value {
			continue
		}
		prior, had := "", false
		if was != nil {
			if prior, had, err = extraArg(was, a.Component, a.Name); err != nil {
				return "", err
			}
		}
		if err := setExtraArg(n, a.Component, a.Name, prior, had); err != nil {
			return "", err
		}
	}
	return n.String()
}

func parse(text string) (*yaml.RNode, error) {
	return textedit.ParseKind(text, "ClusterConfiguration", "ClusterConfiguration", maxConfig)
}

// extraArgs is component's extraArgs node, nil when absent.
func extraArgs(n *yaml.RNode, component string) (*yaml.RNode, error) {
	c := n.Field(component)
	if c == nil || c.Value.IsNilOrEmpty() {
		return nil, nil
	}
	if c.Value.YNode().Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s is not a mapping", component)
	}
	f := c.Value.Field("extraArgs")
	if f == nil || f.Value.IsNilOrEmpty() {
		return nil, nil
	}
	switch f.Value.YNode().Kind {
	case yaml.SequenceNode, yaml.MappingNode:
		return f.Value, nil
	}
	return nil, fmt.Errorf("%s.extraArgs is neither a list nor a map", component)
}

func extraArg(n *yaml.RNode, component, name string) (value string, ok bool, err error) {
	args, err := extraArgs(n, component)
	if err != nil || args == nil {
		return "", false, err
	}
	if args.YNode().Kind == yaml.MappingNode {
		f := args.Field(name)
		if f == nil {
			return "", false, nil
		}
		return f.Value.YNode().Value, true, nil
	}
	items, err := args.Elements()
	if err != nil {
		return "", false, err
	}
	for _, it := range items {
		if scalar(it, "name") == name {
			value, ok = scalar(it, "value"), true
		}
	}
	return value, ok, nil
}

func scalar(n *yaml.RNode, field string) string {
	if f := n.Field(field); f != nil {
		return f.Value.YNode().Value
	}
	return ""
}

// setExtraArg sets (present) or removes (!present) component's flag name.
// A new extraArgs is a list, as kubeadm v1beta4 writes it.
func setExtraArg(n *yaml.RNode, component, name, value string, present bool) error {
	args, err := extraArgs(n, component)
	if err != nil {
		return err
	}
	if args == nil {
		if !present {
			return nil
		}
		if f := n.Field(component); f != nil && f.Value.IsNilOrEmpty() {
			// "component:" with no value: a mapping from here on.
			*f.Value.YNode() = yaml.Node{Kind: yaml.MappingNode, Tag: yaml.NodeTagMap}
		}
		c, err := n.Pipe(yaml.LookupCreate(yaml.MappingNode, component))
		if err != nil {
			return fmt.Errorf("setting %s.extraArgs: %w", component, err)
		}
		// kubeadm writes an empty component as {}: block style once it has a field.
		c.YNode().Style = 0
		list := yaml.NewListRNode()
		list.YNode().Content = []*yaml.Node{argEntry(name, value)}
		return c.PipeE(yaml.SetField("extraArgs", list))
	}
	if args.YNode().Kind == yaml.MappingNode {
		if !present {
			_, err = args.Pipe(yaml.Clear(name))
		} else {
			err = args.PipeE(yaml.SetField(name, yaml.NewStringRNode(value)))
		}
		return dropEmpty(n, component, args, err)
	}
	seq := args.YNode()
	kept := seq.Content[:0]
	done := false
	for _, it := range seq.Content {
		item := yaml.NewRNode(it)
		if scalar(item, "name") != name {
			kept = append(kept, it)
			continue
		}
		if present && !done {
			if err := item.PipeE(yaml.SetField("value", yaml.NewStringRNode(value))); err != nil {
				return err
			}
			kept, done = append(kept, it), true
		}
	}
	seq.Content = kept
	if present && !done {
		seq.Content = append(seq.Content, argEntry(name, value))
	}
	return dropEmpty(n, component, args, nil)
}

// argEntry is a v1beta4 extraArgs entry.
func argEntry(name, value string) *yaml.Node {
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: yaml.NodeTagString, Value: s} }
	return &yaml.Node{Kind: yaml.MappingNode, Tag: yaml.NodeTagMap, Content: []*yaml.Node{str("name"), str(name), str("value"), str(value)}}
}

// dropEmpty removes an extraArgs left empty: kubeadm omits it. A component
// left empty is written {}, as kubeadm writes it, with the key's line
// comment after it: the encoder would put a comment on the key before the
// {}, on a line of its own, which does not parse.
func dropEmpty(n *yaml.RNode, component string, args *yaml.RNode, err error) error {
	if err != nil || len(args.YNode().Content) > 0 {
		return err
	}
	if _, err = n.Pipe(yaml.Lookup(component), yaml.Clear("extraArgs")); err != nil {
		return err
	}
	if f := n.Field(component); f != nil && len(f.Value.YNode().Content) == 0 {
		key, value := f.Key.YNode(), f.Value.YNode()
		value.Style = yaml.FlowStyle
		if key.LineComment != "" && value.LineComment == "" {
			value.LineComment, key.LineComment = key.LineComment, ""
		}
	}
	return nil
}
