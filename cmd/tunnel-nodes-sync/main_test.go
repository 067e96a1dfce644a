package main

import (
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/deploy"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// forEachCommand calls f on every command of the tree, hidden ones too.
func forEachCommand(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		forEachCommand(sub, f)
	}
}

// No flag's usage has a backquoted word: pflag's UnquoteUsage makes it the
// flag's type name in the help (`make image` showed as
// "--coredns-image make image").
func TestFlagUsageHasNoBackquote(t *testing.T) {
	forEachCommand(newRootCommand(), func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if strings.Contains(f.Usage, "`") {
					name, _ := pflag.UnquoteUsage(f)
					t.Errorf("%s --%s: backquote in its usage (shown as type %q): %q", c.CommandPath(), f.Name, name, f.Usage)
				}
			})
		}
	})
}

// Each command's help: only the flags it uses, Examples, exit codes, and
// --profile in one short sentence (its steps are in the long help).
func TestCommandHelp(t *testing.T) {
	installOnly := []string{"node-name", "manifests-dir", "backup-dir", "kubeadm-patches-dir", "control-plane-jobs", "skip", "force", "node-local-dns", "coredns-image", "check"}
	root := newRootCommand()
	for _, tc := range []struct {
		cmd      string
		lacks    []string
		exitCode bool
		steps    bool
	}{
		{"install", nil, true, true},
		{"revert", append(installOnly, "kcm-nodelifecycle", "kubelet-servicemonitor"), true, true},
		{"status", installOnly, true, true},
		{"check", []string{"node-name", "manifests-dir", "skip", "dry-run"}, true, false},
		{"version", []string{"profile", "node-name"}, true, false},
		{"patch-manifests", nil, false, false},
	} {
		c, _, err := root.Find([]string{tc.cmd})
		if err != nil || c.Name() != tc.cmd {
			t.Fatalf("%s: %v", tc.cmd, err)
		}
		for _, f := range tc.lacks {
			if c.Flags().Lookup(f) != nil {
				t.Errorf("%s lists --%s, which it does not use", tc.cmd, f)
			}
		}
		if tc.exitCode && (!strings.Contains(c.Long, "Exit codes:\n  0  ") || c.Example == "") {
			t.Errorf("%s: no exit codes or no Examples in its help", tc.cmd)
		}
		if tc.steps && !strings.Contains(c.Long, "raven (Raven's L7 proxy):\n    records, raven-rbac,") {
			t.Errorf("%s: its long help lacks the profiles' steps:\n%s", tc.cmd, c.Long)
		}
		if p := c.Flags().Lookup("profile"); p != nil && (len(p.Usage) > 120 || strings.Contains(p.Usage, "steps")) {
			t.Errorf("%s --profile: %d characters, want one short sentence: %q", tc.cmd, len(p.Usage), p.Usage)
		}
	}
	for _, cmd := range []string{"status", "check"} {
		c, _, _ := root.Find([]string{cmd})
		if u := c.Flags().Lookup("timeout").Usage; strings.Contains(u, "change") {
			t.Errorf("%s --timeout speaks of changes; it changes nothing: %q", cmd, u)
		}
	}
	// kubectl-style: uninstall is revert, not a near miss of install.
	if c, _, err := root.Find([]string{"uninstall"}); err != nil || c.Name() != "revert" {
		t.Errorf("uninstall: %v, %v; want revert", c, err)
	}
}
