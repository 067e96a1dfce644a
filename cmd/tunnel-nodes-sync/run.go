package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/internal/tunnelsync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
)

type runOptions struct {
	kubeconfig       kubeconfigFlags
	profile          string
	namespace        string
	configMap        string
	configMapKey     string
	service          string
	serverConfig     string
	ravenConfig      string
	edgeNodeSelector string
	httpsTargetPort  int32
	httpTargetPort   int32
	manager          tunnelsync.ManagerOptions
	debounce         time.Duration
	shardsNamespace  string
	singleConfigMap  bool
	kubeDNSTopology  string
}

func newRunCommand() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the sync controller (what the Deployment runs; it joins leader election and writes the records)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config(cmd.Flags())
			if err != nil {
				return err
			}
			if err := o.manager.Validate(); err != nil {
				return err
			}
			restConfig, err := o.kubeconfig.restConfig("")
			if err != nil {
				return err
			}
			mgr, err := tunnelsync.NewManager(restConfig, cfg, o.manager)
			if err != nil {
				return err
			}
			ctrl.Log.Info("Starting tunnel-nodes-sync", "namespace", cfg.Namespace, "configmap", cfg.ConfigMap,
				"shardsNamespace", cfg.ShardsNamespace, "singleConfigMap", !cfg.SkipSingleConfigMap,
				"service", cfg.Service, "serverConfig", cfg.ServerConfig, "rulesConfig", cfg.RulesConfig, "edgeNodeSelector", cfg.EdgeNodeSelector.String(),
				"debounce", cfg.Debounce, "kubeDNSTopology", cfg.KubeDNSTopology, "leaderElect", o.manager.LeaderElect)
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	o.kubeconfig.register(cmd, kubeconfigHelp)
	f := cmd.Flags()
	f.StringVar(&o.profile, "profile", layout.YurtTunnel, "The tunnel layout, which decides the rules and presets the object names: "+strings.Join(layout.Names(), " or "))
	mustRegisterCompletion(cmd, "profile", cobra.FixedCompletions(layout.Names(), cobra.ShellCompDirectiveNoFileComp))
	f.StringVar(&o.namespace, "namespace", tunnelnodes.Namespace, "Namespace of the tunnel Service and ConfigMaps")
	f.StringVar(&o.configMap, "configmap", tunnelnodes.ConfigMapName, "Records ConfigMap; --profile sets the default")
	f.StringVar(&o.configMapKey, "configmap-key", tunnelnodes.ConfigMapKey, "Key of the records ConfigMap")
	f.StringVar(&o.service, "service", tunnelnodes.ServiceName, "Tunnel Service; --profile sets the default")
	f.StringVar(&o.serverConfig, "server-config", tunnelnodes.ServerConfigName, "Tunnel server config ConfigMap listing extra ports, empty disables port sync; --profile sets the default")
	f.StringVar(&o.ravenConfig, "raven-config", "", "The ConfigMap --profile's rules read: under raven, Raven's global config (every node to the proxy ClusterIP while its enable-l7-proxy is true); --profile raven sets raven-cfg")
	f.StringVar(&o.edgeNodeSelector, "edge-node-selector", tunnelsync.DefaultEdgeNodeSelector, "Label selector of edge nodes")
	f.Int32Var(&o.httpsTargetPort, "https-target-port", tunnelnodes.DefaultHTTPSTargetPort, "Target port of https-proxy-ports")
	f.Int32Var(&o.httpTargetPort, "http-target-port", tunnelnodes.DefaultHTTPTargetPort, "Target port of http-proxy-ports")
	f.BoolVar(&o.manager.LeaderElect, "leader-elect", true, "Elect a leader on a Lease so only one replica writes")
	f.StringVar(&o.manager.LeaderElectionID, "leader-election-id", tunnelnodes.LeaderElectionID, "Name of the leader election Lease")
	f.DurationVar(&o.manager.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a standby waits after the leader's last renewal before taking over")
	f.DurationVar(&o.manager.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps retrying to renew before it stops leading; less than the lease duration")
	// 1 s, not kube-controller-manager's 2 s: after an apiserver outage
	// longer than the lease, the first campaign comes within 1–2.2 s (the
	// elector's jitter), so a change made then is written within 5 s.
	f.DurationVar(&o.manager.RetryPeriod, "leader-elect-retry-period", time.Second, "How often replicas try to acquire or renew the Lease")
	f.StringVar(&o.manager.MetricsBindAddress, "metrics-bind-address", ":8080", "Address of the metrics endpoint; 0 disables it")
	f.StringVar(&o.manager.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz")
	f.StringVar(&o.manager.PprofBindAddress, "pprof-bind-address", "", "Address of net/http/pprof for profiling; off when empty")
	f.StringVar(&o.shardsNamespace, "shards-namespace", tunnelnodes.ShardsNamespace, "Namespace of its own for the records' shards (small ConfigMaps that coredns-yurt watches instead of the whole records ConfigMap); empty writes only the single ConfigMap")
	f.BoolVar(&o.singleConfigMap, "single-configmap", true, "Also write the single records ConfigMap (upstream's format, for other readers) while it fits in 1 MiB")
	// A new shard set is up to 4,096 creates: at 100/s they took 41 s of a
	// 100,000-node start; 500/s is within what 8 writers get from one
	// apiserver (BenchmarkFleet100k), and a set is written once.
	f.Float32Var(&o.manager.QPS, "kube-api-qps", 500, "Requests per second to the apiserver (a new shard set is up to 4,096 writes)")
	f.IntVar(&o.manager.Burst, "kube-api-burst", 1000, "Burst of requests to the apiserver")
	f.StringVar(&o.kubeDNSTopology, "kube-dns-topology", "", "Keep "+tunnelnodes.TopologyKeysAnnotation+": VALUE on Service "+tunnelnodes.KubeDNSService+" in --namespace, patching it back when another writer (kubeadm upgrade's CoreDNS addon) drops or changes it; empty: off")
	f.DurationVar(&o.debounce, "debounce", 50*time.Millisecond, "Least time between two syncs: a change after a quiet period is written at once; changes within this time of a sync wait for its end and are written together")
	return cmd
}

// config applies the profile to the names not set explicitly and validates.
func (o *runOptions) config(flags *pflag.FlagSet) (tunnelsync.Config, error) {
	l, err := layout.Named(o.profile)
	if err != nil {
		return tunnelsync.Config{}, err
	}
	if !flags.Changed("configmap") {
		o.configMap = l.RecordsConfigMap
	}
	if !flags.Changed("service") {
		o.service = l.Service
	}
	if !flags.Changed("server-config") {
		o.serverConfig = l.ServerConfig
	}
	if !flags.Changed("raven-config") {
		o.ravenConfig = l.Config
	}
	selector, err := labels.Parse(o.edgeNodeSelector)
	if err != nil {
		return tunnelsync.Config{}, fmt.Errorf("--edge-node-selector: %w", err)
	}
	cfg := tunnelsync.Config{
		Namespace: o.namespace, ConfigMap: o.configMap, ConfigMapKey: o.configMapKey, Service: o.service,
		ServerConfig: o.serverConfig, Layout: l, RulesConfig: o.ravenConfig, EdgeNodeSelector: selector,
		HTTPSTargetPort: o.httpsTargetPort, HTTPTargetPort: o.httpTargetPort, Debounce: o.debounce,
		ShardsNamespace: o.shardsNamespace, SkipSingleConfigMap: !o.singleConfigMap, KubeDNSTopology: o.kubeDNSTopology,
	}
	return cfg, cfg.Validate()
}
