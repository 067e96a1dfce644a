package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/preflight"

	"github.com/spf13/cobra"
)

// exitCheckFailed is check's exit code when a prerequisite fails (0: all
// pass, warnings allowed; 1: an error).
const exitCheckFailed = 2

const checkLong = `Checks install's prerequisites on the cluster, reading only: a line per check,
✔ passed, ⚠ warning, ✖ failed, with what was found and what to do.
The profile is the one the install state records, else --profile.

Checks: profile (the layout's objects), container-runtime (containerd), openyurt
(its version and what install does with kube-controller-manager's node lifecycle
controller), yurthub (on every edge node), tunnel-service, tunnel-server-strategy
(yurt-tunnel: Recreate), edge-kubelet-watch-list (edge kubelets 1.35 or later),
images (--coredns-image and --sync-image on every node), kubeadm-dns (yurt-tunnel:
Service kube-dns, Deployment and ConfigMap coredns). See docs/cli.md.

Output: the lines, or with -o json|yaml the report as a document: profile, result,
checks (name, result, found, action, nodes).

` + "`install --check`" + ` runs the same check with all of install's flags.

Exit codes:
  0  every check passed (warnings allowed)
  1  error: check could not read the cluster, or a flag is wrong
  2  a check failed`

func newCheckCommand() *cobra.Command {
	f := &surgeryFlags{}
	var output string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check install's prerequisites on the cluster (reads only)",
		Long:  checkLong,
		Example: `  # Before install: every check, with what to do about each that fails
  tunnel-nodes-sync check

  # For Raven's L7 proxy, with the images to be imported on the nodes
  tunnel-nodes-sync check --profile raven --coredns-image registry.example/coredns-yurt:v0.1.0

  # The report as JSON
  tunnel-nodes-sync check -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validOutput(output); err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			env, err := f.env(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return checkCluster(cmd.Context(), env, cmd.OutOrStdout(), output)
		},
	}
	f.registerCommon(cmd, readTimeoutHelp)
	registerImages(cmd, &f.opts)
	registerNodeLifecycle(cmd, &f.opts.NodeLifecycle, "What install is to do with kube-controller-manager's node lifecycle controller, for the openyurt check")
	registerOutput(cmd, &output)
	return cmd
}

// checkCluster runs the pre-flight check of env's profile (settled with the
// install state's) and prints it; a failed check is exit status 2.
func checkCluster(ctx context.Context, env *engine.Env, out io.Writer, output string) error {
	if err := install.ResolveProfile(ctx, env); err != nil {
		return err
	}
	r, err := preflight.Run(ctx, env)
	if err != nil {
		return err
	}
	if output == "" {
		for _, c := range r.Checks {
			fmt.Fprintln(out, c.Line())
		}
	} else if err := printReport(out, output, r); err != nil {
		return err
	}
	if r.Result != preflight.Fail {
		return nil
	}
	var failed []string
	for _, c := range r.Checks {
		if c.Outcome == preflight.Fail {
			failed = append(failed, c.Name)
		}
	}
	return &exitStatus{code: exitCheckFailed, msg: fmt.Sprintf("%d of %d checks failed: %s", len(failed), len(r.Checks), strings.Join(failed, ", "))}
}
