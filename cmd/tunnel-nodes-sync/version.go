package main

import (
	"fmt"
	"io"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/version"

	"github.com/spf13/cobra"
)

// versionReport is `version -o json|yaml`; docs/cli.md documents its
// fields, which are only ever added to.
type versionReport struct {
	// Version and Commit are this binary's.
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// Cluster is what the install state records; absent with --client.
	Cluster *clusterVersion `json:"cluster,omitempty"`
}

// clusterVersion is the install the cluster's state records.
type clusterVersion struct {
	// Installed: an install state exists (install ran, and revert did not
	// finish).
	Installed bool `json:"installed"`
	// Version is the yurtdns version whose install last ran to the end; ""
	// when installed but not recorded (an install before v0.1.0, or a first
	// install that did not finish).
	Version string `json:"version,omitempty"`
	Profile string `json:"profile,omitempty"`
	// Error: the cluster could not be read (the exit status is 1).
	Error string `json:"error,omitempty"`
}

// line is the cluster's line of the text output.
func (c clusterVersion) line() string {
	switch {
	case c.Error != "":
		return "Installed: unknown (the cluster could not be read: see the error below)"
	case !c.Installed:
		return "Installed: not installed"
	case c.Version == "":
		return "Installed: yes, version not recorded (an install before v0.1.0, or one that did not finish), profile " + c.Profile
	}
	return "Installed: " + c.Version + ", profile " + c.Profile
}

func newVersionCommand() *cobra.Command {
	var kubeconfig kubeconfigFlags
	var output string
	var clientOnly bool
	timeout := 10 * time.Second
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print this binary's version and commit, and the yurtdns version installed on the cluster",
		Long: `Prints this binary's version and commit, and the yurtdns version the cluster's install state
(ConfigMap kube-system/` + engine.StateConfigMap + `) records: the version whose install last ran to the end, and
its profile; "not installed" when there is no install state.

Exit codes:
  0  printed
  1  error: a flag, or the cluster could not be read (this binary's version is printed all the same)`,
		Example: `  # This binary and the cluster
  tunnel-nodes-sync version

  # This binary only, without reaching the cluster
  tunnel-nodes-sync version --client

  # As JSON
  tunnel-nodes-sync version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validOutput(output); err != nil {
				return err
			}
			if timeout < 0 {
				return fmt.Errorf("--timeout %s: must be 0 or more", timeout)
			}
			r := versionReport{Version: version.Version, Commit: version.BuildCommit()}
			var clusterErr error
			if !clientOnly {
				r.Cluster, clusterErr = installedVersion(cmd, &kubeconfig, timeout)
			}
			if err := printVersion(cmd.OutOrStdout(), output, r); err != nil {
				return err
			}
			return clusterErr
		},
	}
	kubeconfig.register(cmd, kubeconfigHelp)
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, readTimeoutHelp)
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print this binary's version only; do not reach the cluster")
	registerOutput(cmd, &output)
	return cmd
}

// installedVersion reads what the install state records; the error (also
// in the result) makes the exit status 1.
func installedVersion(cmd *cobra.Command, k *kubeconfigFlags, timeout time.Duration) (*clusterVersion, error) {
	f := &surgeryFlags{kubeconfig: *k, opts: engine.Options{Timeout: timeout}}
	env, err := f.env(cmd.Context(), cmd.ErrOrStderr())
	if err == nil {
		var c clusterVersion
		c.Version, c.Installed, err = engine.RecordedVersion(cmd.Context(), env)
		if err == nil {
			c.Profile, err = engine.RecordedProfile(cmd.Context(), env)
		}
		if err == nil {
			return &c, nil
		}
	}
	return &clusterVersion{Error: err.Error()}, err
}

// printVersion prints r as text, or as the document -o asks for.
func printVersion(out io.Writer, output string, r versionReport) error {
	if output != "" {
		return printReport(out, output, r)
	}
	fmt.Fprintf(out, "tunnel-nodes-sync %s (commit %s)\n", r.Version, r.Commit)
	if r.Cluster != nil {
		fmt.Fprintln(out, r.Cluster.line())
	}
	return nil
}
