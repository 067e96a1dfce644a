package tunnelsync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/internal/version"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ManagerOptions are the process-level settings of `run`.
type ManagerOptions struct {
	LeaderElect      bool
	LeaderElectionID string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election as
	// the kube-controller-manager flags of the same names do.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	MetricsBindAddress                        string
	HealthProbeBindAddress                    string
	// QPS and Burst limit the client's requests, as --kube-api-qps and
	// --kube-api-burst of the Kubernetes controllers do.
	QPS   float32
	Burst int
	// PprofBindAddress serves net/http/pprof when set (off by default).
	PprofBindAddress string
}

// Validate checks the leader election timings as client-go's leader
// elector would, but naming the flags.
func (o ManagerOptions) Validate() error {
	if o.QPS <= 0 || o.Burst < 1 {
		return fmt.Errorf("--kube-api-qps (%g) and --kube-api-burst (%d) must be positive", o.QPS, o.Burst)
	}
	if !o.LeaderElect {
		return nil
	}
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"lease-duration", o.LeaseDuration}, {"renew-deadline", o.RenewDeadline}, {"retry-period", o.RetryPeriod}} {
		if d.value <= 0 {
			return fmt.Errorf("--leader-elect-%s (%s) must be positive", d.flag, d.value)
		}
	}
	if o.LeaseDuration <= o.RenewDeadline {
		return fmt.Errorf("--leader-elect-lease-duration (%s) must be longer than --leader-elect-renew-deadline (%s)", o.LeaseDuration, o.RenewDeadline)
	}
	// client-go retries with up to 120% jitter (JitterFactor 1.2).
	if float64(o.RenewDeadline) <= 1.2*float64(o.RetryPeriod) {
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be longer than 1.2 × --leader-elect-retry-period (%s)", o.RenewDeadline, o.RetryPeriod)
	}
	return nil
}

// UserAgent identifies the sync to the apiserver (and in audit logs).
func UserAgent() string { return "tunnel-nodes-sync/" + version.Version }

// NewManager builds the controller-runtime manager with caches limited to
// what the sync reads: the one Service and the one records ConfigMap, each
// field-selected by name, and the shards, label-selected in their
// namespace; and sets the sync controller up in it, with its own store of
// what the records need of each Node (nodes.go), and, with
// cfg.KubeDNSTopology, the kube-dns topology keeper (kubednstopology.go).
// Everything runs on every replica; with opts.LeaderElect only the leader
// writes (leader.go). It needs no apiserver to start: it waits for one,
// saying so (Start), and rides out its outages.
func NewManager(restConfig *rest.Config, cfg Config, opts ManagerOptions) (manager.Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = UserAgent()
	restConfig.QPS, restConfig.Burst = opts.QPS, opts.Burst
	inNamespace := map[string]cache.Config{cfg.Namespace: {}}
	// The single records ConfigMap by name; the shards by their label.
	configMaps := map[string]cache.Config{cfg.Namespace: {FieldSelector: byName(cfg.ConfigMap)}}
	if cfg.ShardsNamespace != "" {
		configMaps[cfg.ShardsNamespace] = cache.Config{
			LabelSelector: labels.SelectorFromSet(labels.Set{tunnelnodes.RecordsOfLabel: cfg.ConfigMap}),
		}
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		// The kinds are fixed: no discovery, which would need the apiserver
		// before anything, probes included, is served.
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return restMapper(), nil },
		Cache: cache.Options{
			NewInformer:      patientInformers(ctrl.Log.WithName("informers")),
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Service{}:   {Namespaces: inNamespace, Field: byName(cfg.Service)},
				&corev1.ConfigMap{}: {Namespaces: configMaps},
			},
		},
		// A cache that waits for the apiserver keeps waiting: the default
		// 2 minutes would end the process, and the pod would crash-loop
		// through a control-plane upgrade.
		Controller:             config.Controller{CacheSyncTimeout: waitForever},
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsBindAddress},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		PprofBindAddress:       opts.PprofBindAddress,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	lead := &leadership{}
	if opts.LeaderElect {
		c, err := newCampaign(restConfig, mgr, cfg.Namespace, opts, lead)
		if err != nil {
			return nil, err
		}
		err = mgr.Add(c)
		if err != nil {
			return nil, err
		}
	} else if err := mgr.Add(alwaysLeading{lead}); err != nil {
		return nil, err
	}
	r := NewReconciler(mgr, cfg)
	if err := r.SetupWithManager(mgr, lead); err != nil {
		return nil, err
	}
	if cfg.KubeDNSTopology != "" {
		if err := setupKubeDNSTopologyKeeper(mgr, lead, cfg.Namespace, cfg.KubeDNSTopology); err != nil {
			return nil, err
		}
	}
	synced := func() error { return cachesSynced(mgr, r.nodes) }
	if err := mgr.AddReadyzCheck("caches", func(*http.Request) error { return synced() }); err != nil {
		return nil, err
	}
	return &waitingManager{Manager: mgr, host: restConfig.Host, synced: synced}, nil
}

// waitForever is a cache sync timeout that does not end.
const waitForever = 100 * 365 * 24 * time.Hour

// restMapper maps the kinds the sync's client and caches read and write,
// all core/v1 (the Nodes and the Lease have clients of their own), and
// their lists, as discovery's mapper does: a cache over several namespaces
// asks a list's scope (ConfigMapList: the shards, listed from the cache).
func restMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	for kind, scope := range map[string]meta.RESTScope{
		"Service": meta.RESTScopeNamespace, "ConfigMap": meta.RESTScopeNamespace, "Node": meta.RESTScopeRoot,
	} {
		m.Add(corev1.SchemeGroupVersion.WithKind(kind), scope)
		m.Add(corev1.SchemeGroupVersion.WithKind(kind+"List"), scope)
	}
	return m
}

// waitingManager says, while its caches have not synced, that it waits for
// the apiserver, and why.
type waitingManager struct {
	manager.Manager
	host   string
	synced func() error
}

// apiServerWaitLogPeriod: while the caches wait, a line this often.
const apiServerWaitLogPeriod = 10 * time.Second

// Start implements manager.Manager.
func (m *waitingManager) Start(ctx context.Context) error {
	go m.logWait(ctx)
	return m.Manager.Start(ctx)
}

func (m *waitingManager) logWait(ctx context.Context) {
	log := m.GetLogger()
	start := time.Now()
	ticker := time.NewTicker(apiServerWaitLogPeriod)
	defer ticker.Stop()
	first := time.After(time.Second)
	for waited := false; ; {
		select {
		case <-ctx.Done():
			return
		case <-first:
		case <-ticker.C:
		}
		if m.synced() == nil {
			if waited {
				log.Info("The apiserver answered: caches synced", "server", m.host, "waited", time.Since(start).Round(time.Millisecond))
			}
			return
		}
		waited = true
		log.Info("Waiting for the apiserver", "server", m.host, "waited", time.Since(start).Round(time.Second), "readyz", m.apiServerReady(ctx))
	}
}

// apiServerReady is the answer of the apiserver's /readyz: "ok", or why not.
func (m *waitingManager) apiServerReady(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := discovery.NewDiscoveryClientForConfig(m.GetConfig())
	if err != nil {
		return err.Error()
	}
	body, err := c.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err.Error()
	}
	return string(body)
}

func byName(name string) fields.Selector { return fields.OneTermEqualSelector("metadata.name", name) }

// namedCache is a cache of its own, added to mgr, holding only the object
// of obj's kind named name in namespace: one informer cannot field-select
// two objects of a kind, and RBAC grants list/watch on each only by its name.
func namedCache(mgr manager.Manager, namespace string, obj client.Object, name string) (cache.Cache, error) {
	named, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		NewInformer:       patientInformers(mgr.GetLogger().WithName("informers")),
		DefaultTransform:  cache.TransformStripManagedFields(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{obj: {Field: byName(name)}},
	})
	if err != nil {
		return nil, err
	}
	return named, mgr.Add(named)
}

// cachesSynced is the readiness check: the informers have their first lists.
func cachesSynced(mgr manager.Manager, nodes *nodeStore) error {
	if !nodes.HasSynced() {
		return errNotSynced
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errNotSynced
	}
	return nil
}

var errNotSynced = errors.New("caches not synced yet")
