package main

import (
	"fmt"

	"github.com/yurtdns/yurtdns/internal/install"

	"github.com/spf13/cobra"
)

func newPatchManifestsCommand() *cobra.Command {
	var manifestsDir, backupDir string
	var dryRun, revert bool
	cmd := &cobra.Command{
		Use:   "patch-manifests",
		Short: "Edit the local kube-apiserver and kube-controller-manager static pod manifests",
		Long: "Disables the node lifecycle controller in kube-controller-manager and makes kube-apiserver\n" +
			"reach kubelets by host name through cluster DNS. Idempotent; originals are kept in --backup-dir.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if revert {
				restored, kept, err := install.RestoreManifests(manifestsDir, backupDir, dryRun)
				if err != nil {
					return err
				}
				for _, p := range restored {
					fmt.Fprintf(out, "%s: restored from %s\n", p, install.BackupPath(backupDir, p))
				}
				for _, p := range kept {
					fmt.Fprintf(out, "%s: changed since it was patched, left as it is\n", p)
				}
				if len(restored)+len(kept) == 0 {
					fmt.Fprintln(out, "nothing to restore")
				}
				return nil
			}
			changes, err := install.PatchManifests(manifestsDir, backupDir, dryRun)
			if err != nil {
				return err
			}
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
	f.BoolVar(&revert, "revert", false, "Restore the originals from --backup-dir where the manifests are still as patched")
	return cmd
}
