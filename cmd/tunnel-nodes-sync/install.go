package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/install"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/internal/version"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The images `make image` writes for this build: fully qualified, because
// `ctr images import` keeps a name as written while the kubelet asks for the
// normalized docker.io/... one.
var (
	defaultCoreDNSImage = "docker.io/yurtdns/coredns-yurt:" + version.Version
	defaultSyncImage    = "docker.io/yurtdns/tunnel-nodes-sync:" + version.Version
)

// surgeryFlags are the flags of install, revert, status and check; each
// registers the ones it uses.
type surgeryFlags struct {
	kubeconfig kubeconfigFlags
	opts       engine.Options
}

// The --timeout texts: install and revert wait for their changes, status
// and check only for the apiserver.
const (
	changesTimeoutHelp = "How long to wait for each change to be live (pods Ready, a restarted component back), and for an apiserver that is away, before failing"
	readTimeoutHelp    = "How long to wait for an apiserver that is away before failing"
)

// registerCommon adds the flags every command that reaches the cluster
// takes: --kubeconfig, --context, --profile and --timeout.
func (f *surgeryFlags) registerCommon(cmd *cobra.Command, timeoutHelp string) {
	f.kubeconfig.register(cmd, kubeconfigHelp)
	registerProfile(cmd, &f.opts.Profile)
	cmd.Flags().DurationVar(&f.opts.Timeout, "timeout", defaultTimeout, timeoutHelp)
}

// registerInstall adds install's own flags.
func (f *surgeryFlags) registerInstall(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.opts.DryRun, "dry-run", false, "Print a unified diff of every change and change nothing")
	fl.BoolVar(&f.opts.Force, "force", false, "Install this binary's version even over a newer one the install state records (a downgrade)")
	fl.StringSliceVar(&f.opts.Skip, "skip", nil, "Steps to skip (comma-separated; the profiles' steps are listed above); each is recorded skipped")
	registerImages(cmd, &f.opts)
	fl.BoolVar(&f.opts.NodeLocalDNS, "node-local-dns", false, "Also run coredns-yurt as a node-local cache at "+nodelocal.Address.String()+
		" (and "+nodelocal.Address6.String()+" on a cluster with IPv6 Services)"+
		" on every node and point each node's kubelet clusterDNS at it (the node-local-dns step; revert undoes it)")
	fl.BoolVar(&f.opts.ControlPlaneJobs, "control-plane-jobs", false, "Patch the static pod manifests with a Job on each control-plane node, one node at a time (instead of --manifests-dir)")
	fl.StringVar(&f.opts.ManifestsDir, "manifests-dir", "", "Local static pod manifests directory for the control-plane step (on a control-plane node: /etc/kubernetes/manifests)")
	fl.StringVar(&f.opts.BackupDir, "backup-dir", "/etc/kubernetes/yurtdns-backup", "Where manifest originals are kept; outside --manifests-dir, same filesystem")
	fl.StringVar(&f.opts.KubeadmPatchesDir, "kubeadm-patches-dir", "", "Where the control-plane step puts its kubeadm patch (kube-apiserver's dnsPolicy), to give to every kubeadm upgrade, init and join as --patches: "+
		"on each control-plane node, under /etc/kubernetes with --control-plane-jobs (default: patches beside the manifests directory, /etc/kubernetes/patches)")
	fl.StringVar(&f.opts.NodeName, "node-name", hostname(), "The node whose kubelet runs --manifests-dir (its mirror pods are waited for after each manifest)")
	registerNodeLifecycle(cmd, &f.opts.NodeLifecycle, "What the control-plane step does with kube-controller-manager's node lifecycle controller")
	f.registerServiceMonitors(cmd)
	testOnlyExtraFlag(cmd, &f.opts.TestOnlyExtraFlags)
}

// registerServiceMonitors adds the ServiceMonitors the prometheus step
// relabels (install) and checks (status).
func (f *surgeryFlags) registerServiceMonitors(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.opts.KubeletServiceMonitor, "kubelet-servicemonitor", steps.DefaultKubeletServiceMonitor,
		"The prometheus-operator ServiceMonitor (NAMESPACE/NAME) of the kubelets, for the prometheus step")
	cmd.Flags().StringVar(&f.opts.NodeExporterServiceMonitor, "node-exporter-servicemonitor", steps.DefaultNodeExporterServiceMonitor,
		"The prometheus-operator ServiceMonitor (NAMESPACE/NAME) of node-exporter, for the prometheus step")
}

// registerNodeLifecycle adds --kcm-nodelifecycle, with what (what the
// command does with the value) and the values' meaning.
func registerNodeLifecycle(cmd *cobra.Command, into *string, what string) {
	cmd.Flags().StringVar(into, "kcm-nodelifecycle", engine.NodeLifecycleAuto, what+": "+
		"auto (leave it on where OpenYurt v1.6 or later runs, read from Deployment kube-system/yurt-manager; else turn it off), "+
		"disable (turn it off with --controllers=...,-nodelifecycle) or keep (never touch kube-controller-manager)")
	mustRegisterCompletion(cmd, "kcm-nodelifecycle", cobra.FixedCompletions(engine.NodeLifecycleValues, cobra.ShellCompDirectiveNoFileComp))
}

// defaultTimeout is --timeout's default.
const defaultTimeout = 5 * time.Minute

// registerProfile adds --profile; empty is the one the install state
// records, else the default.
func registerProfile(cmd *cobra.Command, profile *string) {
	cmd.Flags().StringVar(profile, "profile", "", "The tunnel layout, "+strings.Join(layout.Names(), " or ")+
		" (default: the one the install state records, else "+layout.YurtTunnel+")")
	mustRegisterCompletion(cmd, "profile", cobra.FixedCompletions(layout.Names(), cobra.ShellCompDirectiveNoFileComp))
}

// registerImages adds the images install runs, which check looks for on
// the nodes.
func registerImages(cmd *cobra.Command, o *engine.Options) {
	cmd.Flags().StringVar(&o.CoreDNSImage, "coredns-image", defaultCoreDNSImage, "Image of the CoreDNS DaemonSet; the default is the one make image writes")
	cmd.Flags().StringVar(&o.SyncImage, "sync-image", defaultSyncImage, "Image of tunnel-nodes-sync, which also runs the control-plane Jobs; the default is the one make image writes")
}

// testOnlyExtraFlag registers the hidden --test-only-extra-flag
// COMPONENT=FLAG: the real-cluster tests make a control-plane patch that
// cannot come up with it, to see it rolled back. Not for users.
func testOnlyExtraFlag(cmd *cobra.Command, into *map[string]string) {
	cmd.Flags().StringToStringVar(into, "test-only-extra-flag", nil, "Test only: add FLAG to COMPONENT's patched command")
	if err := cmd.Flags().MarkHidden("test-only-extra-flag"); err != nil {
		panic(err)
	}
}

// hostname is the node name a kubelet registers by default.
func hostname() string {
	h, _ := os.Hostname()
	return strings.ToLower(h)
}

// validate refuses flag values that cannot work before any call to the
// apiserver.
func (f *surgeryFlags) validate() error {
	if f.opts.ControlPlaneJobs && f.opts.ManifestsDir != "" {
		return fmt.Errorf("--control-plane-jobs and --manifests-dir exclude each other")
	}
	return install.ValidateFlags(f.opts)
}

// env is the environment the flags make, once the apiserver answers (see
// waitReachable: errOut gets the lines while it waits).
func (f *surgeryFlags) env(ctx context.Context, errOut io.Writer) (*engine.Env, error) {
	cfg, err := f.kubeconfig.restConfig(kube.InstallUserAgent)
	if err != nil {
		return nil, err
	}
	if err := f.kubeconfig.waitReachable(ctx, cfg, f.opts.Timeout, errOut); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &engine.Env{Client: c, Clientset: cs, Options: f.opts}, nil
}

// Exit codes of install and revert, in their help.
const installExitCodes = `Exit codes:
  0  done: every step applied, skipped or already applied (with --dry-run: nothing changed);
     with --check, every check passed (warnings allowed)
  1  error: a flag, the apiserver, or a step that failed (install again carries on from there)
  2  with --check: a check failed`

func newInstallCommand() *cobra.Command {
	f := &surgeryFlags{}
	var check bool
	cmd := f.command(func(ctx context.Context, env *engine.Env, out io.Writer) error {
		if check {
			return checkCluster(ctx, env, out, "")
		}
		return install.Install(ctx, env, out)
	}, "install", "Turn the cluster's DNS into yurtdns, step by step (idempotent; see revert)")
	cmd.Long = `Turns the cluster's DNS into yurtdns, one step at a time. Each step prints a line: what it
changed, or that it was already applied or skipped; a step still running says so every 15 s.
What a step changes is recorded in ConfigMap kube-system/` + engine.StateConfigMap + ` before it writes,
so that install run again carries on where it stopped and revert restores exactly that.

` + install.Profiles() + `

The control-plane step patches kube-apiserver and kube-controller-manager: give
--control-plane-jobs (a Job on each control-plane node, one node at a time, each
node's kube-apiserver and etcd Ready before the next) or --manifests-dir (this node's
manifests). Without either it is skipped, recorded so, and status says how to apply it.

` + installExitCodes
	cmd.Example = `  # Check the prerequisites, then install, patching the control plane with a Job per node
  tunnel-nodes-sync install --check --control-plane-jobs
  tunnel-nodes-sync install --control-plane-jobs

  # Show every change as a diff, and change nothing
  tunnel-nodes-sync install --control-plane-jobs --dry-run

  # Raven's L7 proxy instead of yurt-tunnel, with a node-local DNS cache on every node
  tunnel-nodes-sync install --profile raven --node-local-dns

  # Everything but the monitoring steps
  tunnel-nodes-sync install --control-plane-jobs --skip prometheus,monitoring`
	f.registerCommon(cmd, changesTimeoutHelp)
	f.registerInstall(cmd)
	cmd.Flags().BoolVar(&check, "check", false, "Run the pre-flight check (see check) with these flags and exit; changes nothing")
	return cmd
}

func newRevertCommand() *cobra.Command {
	f := &surgeryFlags{}
	cmd := f.command(install.Revert, "revert", "Undo what install changed, last step first; values changed since install are left alone")
	cmd.Aliases = []string{"uninstall"}
	cmd.Long = `Undoes what install recorded in ConfigMap kube-system/` + engine.StateConfigMap + `, last step first: deletes
the objects install created, puts back each value it changed while the value is still install's,
and restores the control-plane manifests (locally, or with a Job per control-plane node, as install
patched them). A step still running says so every 15 s. Once every step is reverted, the install
state goes too; a second revert does nothing. The profile is the one the install state records.

What it leaves:
  - a value changed since install, as it is (its line says so);
  - the records ConfigMap and the tunnel Service's dnat-* ports (upstream's own objects);
  - the manifest originals in the backup directory;
  - after --node-local-dns, node-local-dns-leftover on the nodes where pods made under the
    node-local cache still run: it answers their queries and goes once they are gone.

` + install.Profiles() + `

Exit codes:
  0  reverted (with --dry-run: nothing changed)
  1  error: a flag, the apiserver, or a step that failed (revert again carries on from there)`
	cmd.Example = `  # Show what would be restored, and change nothing
  tunnel-nodes-sync revert --dry-run

  # Revert, with the control-plane restore Jobs running another image than install's
  tunnel-nodes-sync revert --sync-image registry.example/yurtdns/tunnel-nodes-sync:v0.1.0

  # The same, by its other name
  tunnel-nodes-sync uninstall`
	f.registerCommon(cmd, changesTimeoutHelp)
	cmd.Flags().BoolVar(&f.opts.DryRun, "dry-run", false, "Say what would be restored and change nothing")
	cmd.Flags().StringVar(&f.opts.SyncImage, "sync-image", "", "Image of the control-plane restore Jobs (default: the one install's patch Jobs ran, as recorded)")
	// The node whose mirror pods revert waits for is the recorded one; an
	// older install's state recorded none: this host, as install's default.
	f.opts.NodeName = hostname()
	return cmd
}

// command is a subcommand that runs run with the environment f's flags
// make, after refusing bad flag values.
func (f *surgeryFlags) command(run func(context.Context, *engine.Env, io.Writer) error, use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			env, err := f.env(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return run(cmd.Context(), env, cmd.OutOrStdout())
		},
	}
}
