package main

import (
	"testing"

	"github.com/yurtdns/yurtdns/deploy"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The command tree keeps kubectl's conventions: the root runs nothing,
// completion is there, the internal commands are hidden, and every command
// that takes --kubeconfig takes --context too.
func TestCommandTree(t *testing.T) {
	root := newRootCommand()
	if root.Runnable() {
		t.Error("the bare command runs something; it must only print help")
	}
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion", "bash"}); err != nil || c.Name() != "bash" {
		t.Errorf("completion bash: %v", err)
	}
	for _, path := range [][]string{{"node-local-dns"}, {"verify-node-dns"}} {
		c, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		if c.IsAvailableCommand() {
			t.Errorf("%s is listed in the help; it is internal", c.CommandPath())
		}
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("kubeconfig") != nil && c.Flags().Lookup("context") == nil {
			t.Errorf("%s takes --kubeconfig but not --context", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// The sync's manifests run `run`, with flags run takes: the bare command
// no longer runs the controller.
func TestManifestsSayRun(t *testing.T) {
	for _, dir := range []string{deploy.TunnelNodesSync, deploy.TunnelNodesSyncRaven} {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range objs {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
				if o.GetKind() != "Deployment" || len(args) == 0 {
					continue
				}
				found = true
				root := newRootCommand()
				cmd, rest, err := root.Find(args)
				if err != nil || cmd.Name() != "run" {
					t.Errorf("%s: %s args %q do not start with run (%v)", dir, o.GetName(), args, err)
					continue
				}
				if err := cmd.ParseFlags(rest); err != nil {
					t.Errorf("%s: %s args %q: %v", dir, o.GetName(), args, err)
				}
			}
		}
		if !found {
			t.Errorf("%s: no Deployment with args", dir)
		}
	}
}
