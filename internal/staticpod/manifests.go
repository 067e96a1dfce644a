package staticpod

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/textedit"

	"go.yaml.in/yaml/v3"
)

// Static pod manifests are edited as YAML node trees: the command list is
// changed in place and every other line keeps its bytes, order and comments.

const (
	// DisableNodeLifecycle stops the controller that evicts pods from edge
	// nodes that lost the cloud; OpenYurt takes over that job.
	DisableNodeLifecycle = "-nodelifecycle"
	// PreferredAddressTypes makes the apiserver reach kubelets by node name,
	// which cluster DNS resolves to the tunnel.
	PreferredAddressTypes = "Hostname,InternalIP,ExternalIP"
)

// staticPod is a parsed manifest with its one container's command node.
type staticPod struct {
	doc     *yaml.Node // the document
	spec    *yaml.Node
	command *yaml.Node // sequence of the container's command (or args)
}

// parseStaticPod accepts a Pod with exactly one container that has a command.
func parseStaticPod(data []byte, wantContainer string) (*staticPod, error) {
	var doc, extra yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("not a single YAML object")
	}
	root := doc.Content[0]
	if kind := textedit.MapValue(root, "kind"); kind == nil || kind.Value != "Pod" {
		return nil, fmt.Errorf("not a Pod")
	}
	spec := textedit.MapValue(root, "spec")
	if spec == nil || spec.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("Pod has no spec")
	}
	containers := textedit.MapValue(spec, "containers")
	if containers == nil || containers.Kind != yaml.SequenceNode || len(containers.Content) != 1 {
		n := 0
		if containers != nil {
			n = len(containers.Content)
		}
		return nil, fmt.Errorf("want exactly one container, found %d", n)
	}
	c := containers.Content[0]
	if name := textedit.MapValue(c, "name"); name == nil || name.Value != wantContainer {
		return nil, fmt.Errorf("the container is not %s", wantContainer)
	}
	command := textedit.MapValue(c, "command")
	if command == nil || command.Kind != yaml.SequenceNode || len(command.Content) == 0 {
		return nil, fmt.Errorf("container %s has no command list", wantContainer)
	}
	return &staticPod{doc: &doc, spec: spec, command: command}, nil
}

// flag finds --name=value in the command; index is -1 when absent.
func (p *staticPod) flag(name string) (value string, index int) {
	prefix := "--" + name + "="
	for i, n := range p.command.Content {
		if v, ok := strings.CutPrefix(n.Value, prefix); ok {
			return v, i
		}
	}
	return "", -1
}

// setFlag sets --name=value, replacing the flag or appending it; it reports
// whether anything changed.
func (p *staticPod) setFlag(name, value string) bool {
	current, i := p.flag(name)
	arg := "--" + name + "=" + value
	switch {
	case i >= 0 && current == value:
		return false
	case i >= 0:
		p.command.Content[i].Value = arg
	default:
		p.command.Content = append(p.command.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: arg})
	}
	return true
}

func (p *staticPod) encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	enc.CompactSeqIndent() // "- item" under its key, as kubeadm writes

	if err := enc.Encode(p.doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// ControllersWithoutNodeLifecycle returns the --controllers value with the
// node lifecycle controller disabled: kept when it already is, "-nodelifecycle,*"
// when the flag is absent, else "-nodelifecycle" first (an explicit
// "nodelifecycle" is replaced).
func ControllersWithoutNodeLifecycle(value string, present bool) string {
	if !present || value == "" {
		return DisableNodeLifecycle + ",*"
	}
	items := strings.Split(value, ",")
	if slices.Contains(items, DisableNodeLifecycle) {
		return value
	}
	items = slices.DeleteFunc(items, func(s string) bool { return s == "nodelifecycle" })
	return strings.Join(append([]string{DisableNodeLifecycle}, items...), ",")
}

// patchControllerManager disables the node lifecycle controller in a
// kube-controller-manager manifest.
func patchControllerManager(manifest []byte) (out []byte, changed bool, err error) {
	p, err := parseStaticPod(manifest, kubeControllerManager)
	if err != nil {
		return nil, false, fmt.Errorf("kube-controller-manager manifest: %w", err)
	}
	value, i := p.flag("controllers")
	if !p.setFlag("controllers", ControllersWithoutNodeLifecycle(value, i >= 0)) {
		return manifest, false, nil
	}
	out, err = p.encode()
	return out, true, err
}

// addFlag appends a flag to a component's command: the test-only hook that
// makes a patch the component cannot start with (--test-only-extra-flag).
func addFlag(manifest []byte, component, flag string) ([]byte, error) {
	p, err := parseStaticPod(manifest, component)
	if err != nil {
		return nil, err
	}
	p.command.Content = append(p.command.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: flag})
	return p.encode()
}

// unsetFlag puts --name back to orig's value, or removes it where orig had
// none; it reports whether anything changed.
func (p *staticPod) unsetFlag(name string, orig *staticPod) bool {
	if value, i := orig.flag(name); i >= 0 {
		changed := p.setFlag(name, value)
		return p.moveBefore(name, orig, i+1) || changed
	}
	_, i := p.flag(name)
	if i < 0 {
		return false
	}
	p.command.Content = slices.Delete(p.command.Content, i, i+1)
	return true
}

// moveBefore puts --name where orig has it: before the argument orig has at
// index next. kubeadm renders a flag from extraArgs after its defaults and
// without it in their order, so the flag goes back where kubeadm puts it.
func (p *staticPod) moveBefore(name string, orig *staticPod, next int) bool {
	if next >= len(orig.command.Content) {
		return false
	}
	successor, _, _ := strings.Cut(orig.command.Content[next].Value, "=")
	_, i := p.flag(name)
	j := slices.IndexFunc(p.command.Content, func(n *yaml.Node) bool {
		before, _, _ := strings.Cut(n.Value, "=")
		return before == successor
	})
	if i < 0 || j < 0 || j == i+1 {
		return false
	}
	node := p.command.Content[i]
	p.command.Content = slices.Delete(p.command.Content, i, i+1)
	if j > i {
		j--
	}
	p.command.Content = slices.Insert(p.command.Content, j, node)
	return true
}

// unpatchControllerManager takes install's edit out of a
// kube-controller-manager manifest rendered since install (kubeadm
// upgrade): --controllers as orig, the original, had it.
func unpatchControllerManager(manifest, orig []byte) ([]byte, bool, error) {
	return unpatch(manifest, orig, kubeControllerManager, func(p, o *staticPod) bool { return p.unsetFlag("controllers", o) })
}

// unpatchAPIServer takes install's edits out of a kube-apiserver manifest
// rendered since install: the address types flag and dnsPolicy as orig had
// them.
func unpatchAPIServer(manifest, orig []byte) ([]byte, bool, error) {
	return unpatch(manifest, orig, kubeAPIServer, func(p, o *staticPod) bool {
		changed := p.unsetFlag("kubelet-preferred-address-types", o)
		was := textedit.MapValue(o.spec, "dnsPolicy")
		for i := 0; i+1 < len(p.spec.Content); i += 2 {
			if p.spec.Content[i].Value != "dnsPolicy" {
				continue
			}
			switch {
			case was == nil:
				p.spec.Content = slices.Delete(p.spec.Content, i, i+2)
				changed = true
			case p.spec.Content[i+1].Value != was.Value:
				p.spec.Content[i+1].Value = was.Value
				changed = true
			}
			break
		}
		return changed
	})
}

func unpatch(manifest, orig []byte, component string, undo func(p, orig *staticPod) bool) ([]byte, bool, error) {
	p, err := parseStaticPod(manifest, component)
	if err != nil {
		return nil, false, fmt.Errorf("%s manifest: %w", component, err)
	}
	o, err := parseStaticPod(orig, component)
	if err != nil {
		return nil, false, fmt.Errorf("%s original: %w", component, err)
	}
	if !undo(p, o) {
		return manifest, false, nil
	}
	out, err := p.encode()
	return out, true, err
}

// patchAPIServer makes a kube-apiserver manifest reach kubelets by host name
// first, resolved by cluster DNS (dnsPolicy ClusterFirstWithHostNet).
func patchAPIServer(manifest []byte) (out []byte, changed bool, err error) {
	p, err := parseStaticPod(manifest, kubeAPIServer)
	if err != nil {
		return nil, false, fmt.Errorf("kube-apiserver manifest: %w", err)
	}
	changed = p.setFlag("kubelet-preferred-address-types", PreferredAddressTypes)
	const policy = "ClusterFirstWithHostNet"
	if dns := textedit.MapValue(p.spec, "dnsPolicy"); dns == nil {
		p.spec.Content = append(p.spec.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "dnsPolicy"},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: policy})
		changed = true
	} else if dns.Value != policy {
		dns.Value = policy
		changed = true
	}
	if !changed {
		return manifest, false, nil
	}
	out, err = p.encode()
	return out, true, err
}
