package textedit

import (
	"fmt"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// ParseKind parses a configuration file of one kind (a
// KubeletConfiguration, a ClusterConfiguration) for a comment-keeping edit:
// at most max bytes, one YAML mapping of that kind; what names it in errors.
func ParseKind(text, kind, what string, max int) (*kyaml.RNode, error) {
	if len(text) > max {
		return nil, fmt.Errorf("%s of %d bytes: over %d", what, len(text), max)
	}
	n, err := kyaml.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing the %s: %w", what, err)
	}
	if n.YNode().Kind != kyaml.MappingNode {
		return nil, fmt.Errorf("the %s is not a YAML mapping", what)
	}
	if got := n.GetKind(); got != kind {
		return nil, fmt.Errorf("kind %q: not a %s", got, kind)
	}
	if err := uniqueKeys(n.YNode()); err != nil {
		return nil, fmt.Errorf("the %s: %w", what, err)
	}
	return n, nil
}

// uniqueKeys refuses a mapping that names a key twice, as the strict
// decoders of kubeadm and the kubelet do: an edit would change one of the
// two and a reader could take the other.
func uniqueKeys(n *kyaml.Node) error {
	if n.Kind == kyaml.MappingNode {
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if seen[k.Value] {
				return fmt.Errorf("line %d: key %q repeated", k.Line, k.Value)
			}
			seen[k.Value] = true
		}
	}
	for _, c := range n.Content {
		if err := uniqueKeys(c); err != nil {
			return err
		}
	}
	return nil
}
