package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/verify"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelsync"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// status's exit codes besides 0 (applied) and 1 (an error): what it found.
const (
	exitDrifted      = 2
	exitNotInstalled = 3
)

func newStatusCommand() *cobra.Command {
	f := &surgeryFlags{}
	var verifyDNS, edgeSelector, output string
	var fromControlPlane bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Report each install step: applied, not applied, skipped or drifted",
		Long: `Reports each step of the profile: applied, not applied, skipped (by the last install, with
the flag that applies it) or drifted, and why. It reads only. The profile is the one the install
state records; --profile may be left out.

Output: a line per step, or with -o json|yaml the report as a document: profile, result,
version, installedVersion, upgrade, steps (name, state, detail, recorded) and, with
--verify-dns or --verify-dns-from-control-plane, nodeNamesWrong (see docs/cli.md).
With -o, the node name checks print their tables on stderr.

` + install.Profiles() + `

Exit codes:
  0  applied: install ran, and nothing it applied has drifted (skipped steps allowed)
  1  error: status could not tell (the apiserver, a flag, a check that could not run)
  2  drifted: a step drifted, or a checked node name resolves wrong
  3  not installed: the install state records no step as applied
     (install never ran, skipped every step, stopped in its first step, or revert finished)`,
		Example: `  # A line per step; the exit code says applied (0), drifted (2) or not installed (3)
  tunnel-nodes-sync status

  # The report as JSON, for a script
  tunnel-nodes-sync status -o json

  # Also resolve every node name at kube-dns and compare with what it should be
  tunnel-nodes-sync status --verify-dns 10.96.0.10:53`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validOutput(output); err != nil {
				return err
			}
			if verifyDNS != "" {
				if _, err := verify.ParseDNSServer(verifyDNS); err != nil {
					return err
				}
			}
			selector, err := labels.Parse(edgeSelector)
			if err != nil {
				return fmt.Errorf("--edge-node-selector: %w", err)
			}
			if err := f.validate(); err != nil {
				return err
			}
			env, err := f.env(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			report, err := install.Status(cmd.Context(), env)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			// The node name checks' tables are for people: with -o, stdout
			// holds the document alone.
			tables := out
			if output != "" {
				tables = cmd.ErrOrStderr()
			} else {
				fmt.Fprintln(out, report.VersionLine())
				printSteps(out, report.Steps)
			}
			if verifyDNS != "" {
				fmt.Fprintf(tables, "\nNode names at %s:\n", verifyDNS)
				l, err := layout.Named(env.Options.Profile)
				if err != nil {
					return err
				}
				wrong, err := verify.VerifyDNS(cmd.Context(), env.Client, l, verifyDNS, selector, tables)
				if err != nil {
					return err
				}
				report.AddWrongNodeNames(wrong)
			}
			if fromControlPlane {
				fmt.Fprintln(tables)
				wrong, failed, err := verify.VerifyDNSFromControlPlane(cmd.Context(), env, edgeSelector, tables)
				if err != nil {
					return err
				}
				if failed > 0 {
					return fmt.Errorf("the check could not run on %d control-plane node(s)", failed)
				}
				report.AddWrongNodeNames(wrong)
			}
			if err := printReport(out, output, report); err != nil {
				return err
			}
			return statusExit(report)
		},
	}
	f.registerCommon(cmd, readTimeoutHelp)
	registerNodeLifecycle(cmd, &f.opts.NodeLifecycle, "What install was given, for the control-plane step's state")
	f.registerServiceMonitors(cmd)
	registerOutput(cmd, &output)
	cmd.Flags().StringVar(&verifyDNS, "verify-dns", "", "Also resolve every node name at this DNS server (IP:PORT, e.g. the kube-dns ClusterIP:53) and compare")
	cmd.Flags().BoolVar(&fromControlPlane, "verify-dns-from-control-plane", false,
		"Also resolve every node name on each control-plane node, as kube-apiserver does there: a Job per node "+
			"(host network, the dnsPolicy and dnsConfig of kube-apiserver's pod there) running --sync-image, deleted afterwards; the profile's rules")
	cmd.Flags().StringVar(&f.opts.SyncImage, "sync-image", defaultSyncImage, "Image of the --verify-dns-from-control-plane Jobs")
	cmd.Flags().StringVar(&edgeSelector, "edge-node-selector", tunnelsync.DefaultEdgeNodeSelector, "Label selector of edge nodes, for --verify-dns and --verify-dns-from-control-plane")
	return cmd
}

// printSteps is status's text: a line per step, the format scripts and the
// real-cluster tests read.
func printSteps(out io.Writer, steps []engine.StatusReport) {
	for _, r := range steps {
		line := fmt.Sprintf("%-18s %s", r.Step, r.Status)
		if r.Detail != "" {
			line += " (" + r.Detail + ")"
		}
		fmt.Fprintln(out, line)
	}
}

// registerOutput adds -o, --output: status's and check's report as a
// document.
func registerOutput(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "", "Output format: json or yaml (the report as a document); text when empty")
	mustRegisterCompletion(cmd, "output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

// outputFormats are -o's values ("": text).
var outputFormats = []string{"json", "yaml"}

// validOutput refuses an -o that is not json or yaml.
func validOutput(output string) error {
	if output != "" && !slices.Contains(outputFormats, output) {
		return fmt.Errorf("--output %q: must be json or yaml (text when empty)", output)
	}
	return nil
}

// printReport prints the report as the document -o asks for; text was
// printed as it came.
func printReport(out io.Writer, output string, r any) error {
	var doc []byte
	var err error
	switch output {
	case "json":
		doc, err = json.MarshalIndent(r, "", "  ")
		doc = append(doc, '\n')
	case "yaml":
		doc, err = yaml.Marshal(r)
	default:
		return nil
	}
	if err != nil {
		return err
	}
	_, err = out.Write(doc)
	return err
}

// statusExit is the exit status of the report's result, with a line for
// stderr that says why.
func statusExit(r install.Report) error {
	switch r.Result {
	case install.ResultDrifted:
		var why []string
		drifted := 0
		for _, s := range r.Steps {
			if s.Status == engine.Drifted {
				drifted++
			}
		}
		if drifted > 0 {
			why = append(why, fmt.Sprintf("%d step(s) drifted", drifted))
		}
		if r.NodeNamesWrong != nil && *r.NodeNamesWrong > 0 {
			why = append(why, fmt.Sprintf("%d node name(s) resolve wrong", *r.NodeNamesWrong))
		}
		return &exitStatus{code: exitDrifted, msg: strings.Join(why, ", ")}
	case install.ResultNotInstalled:
		return &exitStatus{code: exitNotInstalled, msg: "not installed: the install state records no step as applied"}
	}
	return nil
}

// exitStatus is an outcome that is no error but sets the exit status.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string { return e.msg }
