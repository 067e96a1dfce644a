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

// surgeryFlags are shared by install, revert and status.
type surgeryFlags struct {
	kubeconfig kubeconfigFlags
	opts       engine.Options
}

func (f *surgeryFlags) register(cmd *cobra.Command, withInstallFlags bool) {
	f.kubeconfig.register(cmd, kubeconfigHelp)
	fl := cmd.Flags()
	fl.StringVar(&f.opts.ManifestsDir, "manifests-dir", "", "Local static pod manifests directory for the control-plane step (on a control-plane node: /etc/kubernetes/manifests)")
	fl.StringVar(&f.opts.BackupDir, "backup-dir", "/etc/kubernetes/yurtdns-backup", "Where manifest originals are kept; outside --manifests-dir, same filesystem")
	fl.StringVar(&f.opts.KubeadmPatchesDir, "kubeadm-patches-dir", "", "Where the control-plane step puts its kubeadm patch (kube-apiserver's dnsPolicy), to give to every kubeadm upgrade, init and join as --patches: "+
		"on each control-plane node, under /etc/kubernetes with --control-plane-jobs (default: patches beside the manifests directory, /etc/kubernetes/patches)")
	fl.StringVar(&f.opts.NodeName, "node-name", hostname(), "The node whose kubelet runs --manifests-dir (its mirror pods are waited for after each manifest)")
	fl.DurationVar(&f.opts.Timeout, "timeout", defaultTimeout, "How long to wait for each change to be live (pods Ready, a restarted component back), and for an apiserver that is away, before failing")
	registerProfile(cmd, &f.opts.Profile)
	fl.StringVar(&f.opts.KubeletServiceMonitor, "kubelet-servicemonitor", steps.DefaultKubeletServiceMonitor,
		"The prometheus-operator ServiceMonitor (NAMESPACE/NAME) of the kubelets, for the prometheus step")
	fl.StringVar(&f.opts.NodeLifecycle, "kcm-nodelifecycle", engine.NodeLifecycleAuto,
		"What the control-plane step does with kube-controller-manager's node lifecycle controller: auto (leave it on where OpenYurt v1.6 or later runs, "+
			"read from Deployment kube-system/yurt-manager; else turn it off with --controllers=...,-nodelifecycle), disable (always turn it off) or keep (never touch kube-controller-manager)")
	mustRegisterCompletion(cmd, "kcm-nodelifecycle", cobra.FixedCompletions([]string{engine.NodeLifecycleAuto, engine.NodeLifecycleDisable, engine.NodeLifecycleKeep}, cobra.ShellCompDirectiveNoFileComp))
	fl.StringVar(&f.opts.NodeExporterServiceMonitor, "node-exporter-servicemonitor", steps.DefaultNodeExporterServiceMonitor,
		"The prometheus-operator ServiceMonitor (NAMESPACE/NAME) of node-exporter, for the prometheus step")
	if withInstallFlags {
		fl.BoolVar(&f.opts.DryRun, "dry-run", false, "Print a unified diff of every change and change nothing")
		fl.BoolVar(&f.opts.Force, "force", false, "Install this binary's version even over a newer one the install state records (a downgrade)")
		fl.StringSliceVar(&f.opts.Skip, "skip", nil, "Steps to skip, of --profile's (see its steps there)")
		registerImages(cmd, &f.opts)
		fl.BoolVar(&f.opts.NodeLocalDNS, "node-local-dns", false, "Also run coredns-yurt as a node-local cache at "+nodelocal.Address.String()+
			" (and "+nodelocal.Address6.String()+" on a cluster with IPv6 Services)"+
			" on every node and point each node's kubelet clusterDNS at it (the node-local-dns step; revert undoes it)")
		fl.BoolVar(&f.opts.ControlPlaneJobs, "control-plane-jobs", false, "Patch the static pod manifests with a Job on each control-plane node (instead of --manifests-dir)")
		testOnlyExtraFlag(cmd, &f.opts.TestOnlyExtraFlags)
	}
}

// defaultTimeout is --timeout's default.
const defaultTimeout = 5 * time.Minute

// registerProfile adds --profile; empty is the one the install state
// records, else the default.
func registerProfile(cmd *cobra.Command, profile *string) {
	cmd.Flags().StringVar(profile, "profile", "", "The tunnel layout: "+install.Describe()+
		". Default: the one the install state records, else "+layout.YurtTunnel+"; one that differs from the recorded one is an error")
	mustRegisterCompletion(cmd, "profile", cobra.FixedCompletions(layout.Names(), cobra.ShellCompDirectiveNoFileComp))
}

// registerImages adds the images install runs, which check looks for on
// the nodes.
func registerImages(cmd *cobra.Command, o *engine.Options) {
	cmd.Flags().StringVar(&o.CoreDNSImage, "coredns-image", defaultCoreDNSImage, "Image of the CoreDNS DaemonSet (`make image` writes it)")
	cmd.Flags().StringVar(&o.SyncImage, "sync-image", defaultSyncImage, "Image of tunnel-nodes-sync (`make image` writes it); also runs the control-plane Jobs")
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

func (f *surgeryFlags) env() (*engine.Env, error) {
	if f.opts.ControlPlaneJobs && f.opts.ManifestsDir != "" {
		return nil, fmt.Errorf("--control-plane-jobs and --manifests-dir exclude each other")
	}
	cfg, err := f.kubeconfig.restConfig(kube.InstallUserAgent)
	if err != nil {
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

func newInstallCommand() *cobra.Command {
	f := &surgeryFlags{}
	var check bool
	cmd := f.command(func(ctx context.Context, env *engine.Env, out io.Writer) error {
		if check {
			return checkCluster(ctx, env, out, "")
		}
		return install.Install(ctx, env, out)
	}, "install", "Turn the cluster's DNS into yurtdns, step by step (idempotent; see revert)")
	cmd.Long = "Steps, in order, per --profile: " + install.Describe() + ".\n" +
		"Each step says what it changed or that it was already applied; what it changed is recorded in\n" +
		"ConfigMap kube-system/" + engine.StateConfigMap + " so that revert restores exactly that."
	f.register(cmd, true)
	cmd.Flags().BoolVar(&check, "check", false, "Run the pre-flight check (see check) with these flags and exit; changes nothing")
	return cmd
}

func newRevertCommand() *cobra.Command {
	f := &surgeryFlags{}
	cmd := f.command(install.Revert, "revert", "Undo what install changed, last step first; values changed since install are left alone")
	f.register(cmd, false)
	cmd.Flags().BoolVar(&f.opts.DryRun, "dry-run", false, "Say what would be restored and change nothing")
	cmd.Flags().StringVar(&f.opts.SyncImage, "sync-image", "", "Image of the control-plane restore Jobs (default: the one install's patch Jobs ran, as recorded)")
	return cmd
}

// command is a subcommand that runs run with the environment f's flags make.
func (f *surgeryFlags) command(run func(context.Context, *engine.Env, io.Writer) error, use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := f.env()
			if err != nil {
				return err
			}
			return run(cmd.Context(), env, cmd.OutOrStdout())
		},
	}
}
