package kubeproxyconf

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/yurtdns/yurtdns/internal/textedit"

	"go.yaml.in/yaml/v3"
)

// CommentOutKubeconfig comments out clientConnection.kubeconfig in a
// kube-proxy config.conf, so kube-proxy uses the in-cluster config (which
// yurthub rewrites to itself on edge nodes). Only that one line changes, so
// revert restores the text byte for byte. Already commented: unchanged.
func CommentOutKubeconfig(conf string) (string, error) {
	root, err := parseKubeProxyConf(conf)
	if err != nil {
		return "", err
	}
	cc := textedit.MapValue(root, "clientConnection")
	if cc == nil || cc.Tag == "!!null" {
		return conf, nil
	}
	if cc.Kind != yaml.MappingNode || cc.Style&yaml.FlowStyle != 0 {
		return "", fmt.Errorf("kube-proxy config.conf: clientConnection has an unexpected layout")
	}
	var keyNode *yaml.Node
	for i := 0; i+1 < len(cc.Content); i += 2 {
		if cc.Content[i].Value == "kubeconfig" {
			keyNode = cc.Content[i]
		}
	}
	if keyNode == nil {
		return conf, nil
	}
	lines := strings.SplitAfter(conf, "\n")
	i := keyNode.Line - 1
	if i < 0 || i >= len(lines) {
		return "", fmt.Errorf("kube-proxy config.conf: cannot locate clientConnection.kubeconfig")
	}
	line := lines[i]
	col := keyNode.Column - 1
	if col < 0 || col > len(line) || !strings.HasPrefix(line[col:], "kubeconfig") {
		return "", fmt.Errorf("kube-proxy config.conf: unexpected layout around clientConnection.kubeconfig")
	}
	lines[i] = line[:col] + "#" + line[col:]
	return strings.Join(lines, ""), nil
}

// KubeProxyKubeconfig is clientConnection.kubeconfig of a kube-proxy
// config.conf ("" when unset, empty or commented out).
func KubeProxyKubeconfig(conf string) (string, error) {
	root, err := parseKubeProxyConf(conf)
	if err != nil {
		return "", err
	}
	v := textedit.MapValue(textedit.MapValue(root, "clientConnection"), "kubeconfig")
	if v == nil || v.Tag == "!!null" {
		return "", nil
	}
	return v.Value, nil
}

// EnableEndpointSliceProxyingOff adds featureGates.EndpointSliceProxying:
// false to a kube-proxy config.conf. Servers older than 1.22 need it: their
// kube-proxy watches EndpointSlices, which yurthub did not serve then.
// Already present: unchanged. Only lines are added, so revert restores the
// text byte for byte.
func EnableEndpointSliceProxyingOff(conf string) (string, error) {
	root, err := parseKubeProxyConf(conf)
	if err != nil {
		return "", err
	}
	gates := textedit.MapValue(root, "featureGates")
	const gate = "EndpointSliceProxying"
	switch {
	case gates == nil:
		sep := "\n"
		if conf == "" || strings.HasSuffix(conf, "\n") {
			sep = ""
		}
		return conf + sep + "featureGates:\n  " + gate + ": false\n", nil
	case gates.Kind != yaml.MappingNode || gates.Style&yaml.FlowStyle != 0:
		return "", fmt.Errorf("kube-proxy config.conf: featureGates has an unexpected layout")
	case textedit.MapValue(gates, gate) != nil:
		if v := textedit.MapValue(gates, gate); v.Value != "false" {
			return "", fmt.Errorf("kube-proxy config.conf sets %s: %s; it must be false on this server", gate, v.Value)
		}
		return conf, nil
	}
	// Insert as the first entry under featureGates, indented like the others.
	lines := strings.SplitAfter(conf, "\n")
	indent := strings.Repeat(" ", gates.Content[0].Column-1)
	at := gates.Content[0].Line - 1
	lines = append(lines[:at], append([]string{indent + gate + ": false\n"}, lines[at:]...)...)
	return strings.Join(lines, ""), nil
}

// yamlOnlyBreaks are the line breaks YAML counts and a split on "\n" does
// not: with one of them the edits would change the wrong line.
var yamlOnlyBreaks = regexp.MustCompile("\r[^\n]|\r$|\u0085|\u2028|\u2029")

// parseKubeProxyConf returns the top-level mapping of a KubeProxyConfiguration.
func parseKubeProxyConf(conf string) (*yaml.Node, error) {
	if loc := yamlOnlyBreaks.FindStringIndex(conf); loc != nil {
		return nil, fmt.Errorf("kube-proxy config.conf has a line break other than \\n or \\r\\n at byte %d", loc[0])
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(conf), &doc); err != nil {
		return nil, fmt.Errorf("kube-proxy config.conf is not YAML: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode || doc.Content[0].Style&yaml.FlowStyle != 0 {
		return nil, fmt.Errorf("kube-proxy config.conf is not a KubeProxyConfiguration object in block style")
	}
	if kind := textedit.MapValue(doc.Content[0], "kind"); kind == nil || kind.Value != "KubeProxyConfiguration" {
		return nil, fmt.Errorf("kube-proxy config.conf is not a KubeProxyConfiguration")
	}
	return doc.Content[0], nil
}
