// Command tunnel-nodes-sync keeps the OpenYurt node-name records and the
// tunnel Service's extra ports right (`run`), and installs, reverts and
// reports yurtdns on a cluster (`install`, `revert`, `status`), and checks
// install's prerequisites (`check`), and prints versions (`version`).
package main

import (
	"errors"
	goflag "flag"
	"fmt"
	"os"

	"github.com/yurtdns/yurtdns/internal/version"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	err := newRootCommand().Execute()
	var status *exitStatus
	switch {
	case err == nil:
	case errors.As(err, &status):
		fmt.Fprintln(os.Stderr, status.msg)
		os.Exit(status.code)
	default:
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	// No RunE: a bare tunnel-nodes-sync prints help and starts nothing (on
	// an admin's machine, running would join leader election and write
	// records); the Deployment says `run`.
	root := &cobra.Command{
		Use:           "tunnel-nodes-sync",
		Short:         "Keep OpenYurt node-name DNS records and tunnel ports in sync; install, revert and report yurtdns",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCommand(), newInstallCommand(), newRevertCommand(), newStatusCommand(), newCheckCommand(), newPatchManifestsCommand(),
		newVerifyNodeDNSCommand(), newNodeLocalDNSCommand(), newVersionCommand())

	// klog's -v and friends, shared by every subcommand.
	klogFlags := goflag.NewFlagSet("klog", goflag.ExitOnError)
	klog.InitFlags(klogFlags)
	for _, name := range []string{"v", "vmodule"} {
		root.PersistentFlags().AddGoFlag(klogFlags.Lookup(name))
	}
	ctrl.SetLogger(klog.NewKlogr())
	return root
}
