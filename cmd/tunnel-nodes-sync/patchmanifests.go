package main

import (
	"fmt"

	"github.com/yurtdns/yurtdns/internal/install"

	"github.com/spf13/cobra"
)

func newPatchManifestsCommand() *cobra.Command {
	var manifestsDir, backupDir string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "patch-manifests",
		Short: "Edit the local kube-apiserver and kube-controller-manager static pod manifests",
		Long: "Disables the node lifecycle controller in kube-controller-manager and makes kube-apiserver\n" +
			"reach kubelets by host name through cluster DNS. Idempotent; originals are kept in --backup-dir.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			changes, err := install.PatchManifests(manifestsDir, backupDir, dryRun)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, c := range changes {
				switch {
				case !c.Changed:
					fmt.Fprintf(out, "%s: already applied\n", c.Path)
				case dryRun:
					fmt.Fprint(out, c.Diff)
				default:
					fmt.Fprintf(out, "%s: patched (original in %s)\n", c.Path, install.BackupPath(backupDir, c.Path))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&manifestsDir, "manifests-dir", "/etc/kubernetes/manifests", "Static pod manifests directory")
	f.StringVar(&backupDir, "backup-dir", "/etc/kubernetes/yurtdns-backup", "Where originals are kept; must be outside --manifests-dir, on the same filesystem")
	f.BoolVar(&dryRun, "dry-run", false, "Print a unified diff of each change and write nothing")
	return cmd
}
