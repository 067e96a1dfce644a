package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/verify"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelsync"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
)

// newVerifyNodeDNSCommand is what status --verify-dns-from-control-plane
// runs in a Job on each control-plane node: every node name resolved with
// this process's own resolver (Go's, reading the pod's resolv.conf, which
// is kube-apiserver's view there), compared with --profile's rules.
// Hidden: internal (docs/cli.md).
func newVerifyNodeDNSCommand() *cobra.Command {
	var kubeconfig kubeconfigFlags
	var edgeSelector, profile string
	cmd := &cobra.Command{
		Use:    verify.VerifyDNSCommand,
		Short:  "Resolve every node name with this host's resolver and compare (run by status --verify-dns-from-control-plane)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			selector, err := labels.Parse(edgeSelector)
			if err != nil {
				return fmt.Errorf("--edge-node-selector: %w", err)
			}
			l, err := layout.Named(profile)
			if err != nil {
				return err
			}
			c, err := kubeconfig.client()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			n, err := verify.VerifyDNSWithResolver(cmd.Context(), c, l, net.DefaultResolver, selector, out)
			if err != nil {
				return err
			}
			// Wrong answers are the report, not a failure of the check.
			fmt.Fprintln(out, verify.VerifySummary(n))
			return nil
		},
	}
	kubeconfig.register(cmd, kubeconfigHelp)
	cmd.Flags().StringVar(&edgeSelector, "edge-node-selector", tunnelsync.DefaultEdgeNodeSelector, "Label selector of edge nodes")
	cmd.Flags().StringVar(&profile, "profile", layout.YurtTunnel, "The rules to compare with: "+strings.Join(layout.Names(), " or "))
	return cmd
}
