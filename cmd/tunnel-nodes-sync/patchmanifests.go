package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/internal/staticpod"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func newPatchManifestsCommand() *cobra.Command {
	var manifestsDir, backupDir, patchesDir, nodeName, nodeLifecycle string
	var kubeconfig kubeconfigFlags
	var dryRun, revert bool
	var timeout time.Duration
	var extraFlags map[string]string
	cmd := &cobra.Command{
		Use:   "patch-manifests",
		Short: "Edit the local kube-apiserver and kube-controller-manager static pod manifests",
		Long: "Makes kube-apiserver reach kubelets by host name through cluster DNS and, as --kcm-nodelifecycle\n" +
			"says (auto, as install: off unless OpenYurt v1.6 or later runs), disables kube-controller-manager's\n" +
			"node lifecycle controller. Idempotent; originals are kept in --backup-dir.\n" +
			"Writes a kubeadm patch (kube-apiserver's dnsPolicy) into --kubeadm-patches-dir: give that directory\n" +
			"to kubeadm upgrade (--patches) so that it renders the edit again.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if err := engine.ValidNodeLifecycle(nodeLifecycle); err != nil {
				return err
			}
			if timeout < 0 {
				return fmt.Errorf("--timeout %s: must be 0 or more", timeout)
			}
			if patchesDir == "" {
				patchesDir = filepath.Join(filepath.Dir(filepath.Clean(manifestsDir)), "patches")
			}
			opts := staticpod.ManifestOptions{DryRun: dryRun, TestOnlyExtraFlags: extraFlags, KubeadmPatchesDir: patchesDir}
			var c client.Client
			if kubeconfig.given() || (nodeLifecycle != engine.NodeLifecycleDisable && nodeLifecycle != engine.NodeLifecycleKeep && !revert) {
				var err error
				if c, err = kubeconfig.client(); err != nil {
					return fmt.Errorf("%w (--kcm-nodelifecycle %s reads the OpenYurt version from the cluster; or give %s or %s)",
						err, engine.NodeLifecycleAuto, engine.NodeLifecycleDisable, engine.NodeLifecycleKeep)
				}
			}
			if c != nil && !dryRun {
				opts.Kubelet = &staticpod.KubeletWait{Client: c, Node: nodeName, Timeout: timeout}
			}
			if !revert {
				// install's resolution: auto reads the OpenYurt version.
				keep, why, err := steps.KeepNodeLifecycle(cmd.Context(), &engine.Env{Client: c, Options: engine.Options{NodeLifecycle: nodeLifecycle}})
				if err != nil {
					return err
				}
				if keep {
					fmt.Fprintf(out, "kube-controller-manager left as it is: %s\n", why)
				}
				opts.KeepNodeLifecycle = keep
			}
			if revert {
				restored, kept, err := staticpod.RestoreManifests(cmd.Context(), manifestsDir, backupDir, opts)
				if err != nil {
					return err
				}
				for _, p := range restored {
					if filepath.Base(p) == staticpod.KubeadmPatchFile {
						fmt.Fprintf(out, "%s: removed\n", p)
						continue
					}
					fmt.Fprintf(out, "%s: restored\n", p)
				}
				for _, p := range kept {
					fmt.Fprintf(out, "%s: changed since it was patched, left as it is\n", p)
				}
				if len(restored)+len(kept) == 0 {
					fmt.Fprintln(out, "nothing to restore")
				}
				return nil
			}
			changes, err := staticpod.PatchManifests(cmd.Context(), manifestsDir, backupDir, opts)
			for _, c := range changes {
				switch {
				case !c.Changed:
					fmt.Fprintf(out, "%s: already applied\n", c.Path)
				case dryRun:
					fmt.Fprint(out, c.Diff)
				case filepath.Base(c.Path) == staticpod.KubeadmPatchFile:
					fmt.Fprintf(out, "%s: written (give %s to kubeadm upgrade, init and join as --patches)\n", c.Path, patchesDir)
				default:
					line := fmt.Sprintf("%s: patched (original in %s)", c.Path, staticpod.BackupPath(backupDir, c.Path))
					if c.Note != "" {
						line += "; " + c.Note
					}
					fmt.Fprintln(out, line)
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&manifestsDir, "manifests-dir", "/etc/kubernetes/manifests", "Static pod manifests directory")
	f.StringVar(&backupDir, "backup-dir", "/etc/kubernetes/yurtdns-backup", "Where originals are kept; must be outside --manifests-dir, on the same filesystem")
	f.StringVar(&patchesDir, "kubeadm-patches-dir", "", "Where install's kubeadm patch goes (kube-apiserver's dnsPolicy), for kubeadm upgrade/init/join --patches (default: patches beside --manifests-dir)")
	f.BoolVar(&dryRun, "dry-run", false, "Print a unified diff of each change and write nothing")
	registerNodeLifecycle(cmd, &nodeLifecycle, "What to do with kube-controller-manager's node lifecycle controller, as install's flag (auto needs --kubeconfig)")
	f.BoolVar(&revert, "revert", false, "Restore the originals from --backup-dir where the manifests are still as patched")
	kubeconfig.register(cmd, "With it (or --context), wait after each manifest until the kubelet runs it (mirror pod with the new config hash, Ready), "+
		"and restore the original of a patched component that does not come back within --timeout (e.g. /etc/kubernetes/admin.conf)")
	f.StringVar(&nodeName, "node-name", hostname(), "This node's name (its mirror pods are COMPONENT-NODE)")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "How long to wait for each component to come back")
	testOnlyExtraFlag(cmd, &extraFlags)
	return cmd
}
