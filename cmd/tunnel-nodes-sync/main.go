// Command tunnel-nodes-sync keeps the OpenYurt node-name records and the
// tunnel Service's extra ports right (`run`, the default).
package main

import (
	goflag "flag"
	"fmt"
	"os"

	"github.com/yurtdns/yurtdns/internal/version"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	run := newRunCommand()
	root := &cobra.Command{
		Use:           "tunnel-nodes-sync",
		Short:         "Keep OpenYurt node-name DNS records and tunnel ports in sync",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a subcommand, run.
		Args: cobra.NoArgs,
		RunE: run.RunE,
	}
	root.Flags().AddFlagSet(run.Flags())
	root.AddCommand(run, newInstallCommand(), newRevertCommand(), newStatusCommand(), newPatchManifestsCommand(), newVerifyNodeDNSCommand(), newNodeLocalDNSCommand())
	root.CompletionOptions.DisableDefaultCmd = true

	// klog's -v and friends, shared by every subcommand.
	klogFlags := goflag.NewFlagSet("klog", goflag.ExitOnError)
	klog.InitFlags(klogFlags)
	for _, name := range []string{"v", "vmodule"} {
		root.PersistentFlags().AddGoFlag(klogFlags.Lookup(name))
	}
	ctrl.SetLogger(klog.NewKlogr())
	return root
}
