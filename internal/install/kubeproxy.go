package install

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// CommentOutKubeconfig comments out clientConnection.kubeconfig in a
// kube-proxy config.conf, so kube-proxy uses the in-cluster config (which
// yurthub rewrites to itself on edge nodes). Only that one line changes, so
// revert restores the text byte for byte. Already commented: unchanged.
func CommentOutKubeconfig(conf string) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(conf), &doc); err != nil {
		return "", fmt.Errorf("kube-proxy config.conf is not YAML: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", fmt.Errorf("kube-proxy config.conf is not a KubeProxyConfiguration object")
	}
	if kind := mapValue(doc.Content[0], "kind"); kind == nil || kind.Value != "KubeProxyConfiguration" {
		return "", fmt.Errorf("kube-proxy config.conf is not a KubeProxyConfiguration")
	}
	cc := mapValue(doc.Content[0], "clientConnection")
	if cc == nil {
		return conf, nil
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
