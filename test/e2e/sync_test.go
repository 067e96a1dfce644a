package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	gosync "sync"
	"syscall"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// records reads the records text, "" when the ConfigMap is missing.
func records(t harness.TB, cp *harness.ControlPlane, name string) string {
	t.Helper()
	cm, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return cm.Data[tunnelnodes.ConfigMapKey]
}

// syncBudget is how long the records may take to follow a change: the
// debounce is 50 ms.
const syncBudget = time.Second

// updateNode applies mutate to a node with conflict retries, the status
// through the status subresource as the kubelet writes it.
func updateNode(t *testing.T, cp *harness.ControlPlane, name string, mutate func(*corev1.Node), status bool) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(n)
		if status {
			_, err = cp.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		} else {
			_, err = cp.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		t.Fatalf("updating node %s: %v", name, err)
	}
}

// TestSyncFollowsEveryNodeChange walks each kind of cluster change and checks
// the records ConfigMap shows it promptly, with unrelated content kept.
func TestSyncFollowsEveryNodeChange(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	for _, n := range []harness.Node{
		{Name: "master-1", InternalIP: "192.168.0.10", ExternalIP: "203.0.113.10"},
		{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true},
		{Name: "node-1", InternalIP: "192.168.0.22", Edge: true},
		{Name: "edge-node-1", InternalIP: "192.168.0.23", Edge: true},
	} {
		cp.CreateNode(t, n)
	}
	// The ConfigMap exists with content of someone else's: it must stay.
	cp.ApplyConfigMap(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ConfigMapName,
			Labels: map[string]string{"team": "edge"}, Annotations: map[string]string{"note": "keep"}},
		Data: map[string]string{"other-key": "kept"},
	})
	sync := harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")

	expectRecords(t, syncBudget, cp, "10.96.0.9\tedge-node-1", "10.96.0.9\tnode-1", "10.96.0.9\tworker-1", "192.168.0.10\tmaster-1")
	cm, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["other-key"] != "kept" || cm.Labels["team"] != "edge" || cm.Annotations["note"] != "keep" {
		t.Errorf("unrelated content lost: data %v labels %v annotations %v", cm.Data, cm.Labels, cm.Annotations)
	}
	if _, err := time.Parse(time.RFC3339Nano, cm.Annotations[tunnelnodes.LastChangeTriggerTimeAnnotation]); err != nil {
		t.Errorf("trigger-time annotation: %v", err)
	}

	// Node added.
	cp.CreateNode(t, harness.Node{Name: "worker-2", InternalIP: "192.168.0.24", Edge: true})
	expectRecords(t, syncBudget, cp, "10.96.0.9\tedge-node-1", "10.96.0.9\tnode-1", "10.96.0.9\tworker-1", "10.96.0.9\tworker-2", "192.168.0.10\tmaster-1")

	// Deleting node-1 keeps edge-node-1 (upstream deleted both: suffix match).
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectRecords(t, syncBudget, cp, "10.96.0.9\tedge-node-1", "10.96.0.9\tworker-1", "10.96.0.9\tworker-2", "192.168.0.10\tmaster-1")

	// Edge label flipped off: worker-2 becomes a cloud node at its InternalIP.
	updateNode(t, cp, "worker-2", func(n *corev1.Node) { n.Labels[tunnelnodes.EdgeNodeLabel] = "false" }, false)
	expectRecords(t, syncBudget, cp, "10.96.0.9\tedge-node-1", "10.96.0.9\tworker-1", "192.168.0.10\tmaster-1", "192.168.0.24\tworker-2")

	// InternalIP changed (upstream saw this only on a 30-minute resync).
	updateNode(t, cp, "master-1", func(n *corev1.Node) {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.99"}}
	}, true)
	expectRecords(t, syncBudget, cp, "10.96.0.9\tedge-node-1", "10.96.0.9\tworker-1", "192.168.0.24\tworker-2", "192.168.0.99\tmaster-1")

	// InternalIP removed: the ExternalIP is used.
	updateNode(t, cp, "worker-2", func(n *corev1.Node) {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.24"}}
	}, true)
	expectRecords(t, syncBudget, cp, "10.96.0.9\tedge-node-1", "10.96.0.9\tworker-1", "192.168.0.99\tmaster-1", "203.0.113.24\tworker-2")

	// A node with no address at all is skipped and counted.
	cp.CreateNode(t, harness.Node{Name: "cloud-bare"})
	harness.Eventually(t, time.Second, func() error {
		if got := harness.Metric(t, sync.MetricsURL, `tunnel_nodes_sync_records{kind="skipped"}`); got != 1 {
			return fmt.Errorf("skipped = %v, want 1", got)
		}
		return nil
	})

	// Tunnel Service recreated with a new ClusterIP: every edge record follows.
	cp.DeleteService(t, tunnelnodes.Namespace, tunnelnodes.ServiceName)
	cp.CreateService(t, harness.TunnelService("10.96.0.77"))
	expectRecords(t, syncBudget, cp, "10.96.0.77\tedge-node-1", "10.96.0.77\tworker-1", "192.168.0.99\tmaster-1", "203.0.113.24\tworker-2")

	// Someone overwrites the records: the sync puts them back (level-triggered).
	cp.ApplyConfigMap(t, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ConfigMapName},
		Data:       map[string]string{tunnelnodes.ConfigMapKey: "1.2.3.4\tbogus", "other-key": "kept"},
	})
	expectRecords(t, syncBudget, cp, "10.96.0.77\tedge-node-1", "10.96.0.77\tworker-1", "192.168.0.99\tmaster-1", "203.0.113.24\tworker-2")

	if w, ok := harness.WaitMetric(t, sync.MetricsURL, `tunnel_nodes_sync_writes_total{object="configmap"}`, func(w float64) bool { return w >= 8 }); !ok {
		t.Errorf("writes_total = %v, want one per change (>= 8)", w)
	}
}

// syncedEdgeNode is a control plane with the tunnel Service and one edge
// node, worker-1, and a sync that has written its record.
func syncedEdgeNode(t *testing.T) (*harness.ControlPlane, *harness.Sync) {
	t.Helper()
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	sync := harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")
	expectRecords(t, syncBudget, cp, "10.96.0.9\tworker-1")
	return cp, sync
}

// TestSyncCreatesConfigMapAndSkipsNoOps: the ConfigMap is created when
// missing, and a restart with nothing changed writes nothing.
func TestSyncCreatesConfigMapAndSkipsNoOps(t *testing.T) {
	t.Parallel()
	cp, first := syncedEdgeNode(t)
	ctx := context.Background()
	cm, _ := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
	first.Stop()

	second := harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")
	time.Sleep(500 * time.Millisecond)
	again, _ := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
	if again.ResourceVersion != cm.ResourceVersion {
		t.Errorf("an unchanged cluster was written again (resourceVersion %s -> %s)", cm.ResourceVersion, again.ResourceVersion)
	}
	if w := harness.Metric(t, second.MetricsURL, `tunnel_nodes_sync_writes_total{object="configmap"}`); w > 0 {
		t.Errorf("writes_total = %v after a no-op start", w)
	}
}

// TestSyncPorts: dnat-* ports follow the server config; other ports stay;
// bad entries are reported and skipped while the good ones apply.
func TestSyncPorts(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	svc := harness.TunnelService("10.96.0.9")
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "metrics", Port: 9200, TargetPort: intstr.FromInt32(9200), Protocol: corev1.ProtocolTCP})
	cp.CreateService(t, svc)
	cp.ApplyConfigMap(t, harness.ServerConfig(map[string]string{
		tunnelnodes.HTTPSProxyPortsKey: " 9445, 9100 ,10250",
		tunnelnodes.HTTPProxyPortsKey:  "8080,9100",
		tunnelnodes.DNATPortsPairKey:   "9300=10264, bogus",
	}))
	sync := harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")

	expectPorts := func(want ...string) {
		t.Helper()
		harness.Eventually(t, time.Second, func() error {
			s, err := cp.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var got []string
			for _, p := range s.Spec.Ports {
				got = append(got, fmt.Sprintf("%s:%d->%s", p.Name, p.Port, p.TargetPort.String()))
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("ports %v, want %v", got, want)
			}
			return nil
		})
	}
	expectPorts("https:10250->10263", "http:10255->10264", "metrics:9200->9200",
		"dnat-8080:8080->10264", "dnat-9100:9100->10263", "dnat-9300:9300->10264", "dnat-9445:9445->10263")

	// The bad entry is reported on the server config as an event, and counted.
	harness.Eventually(t, 2*time.Second, func() error {
		evs, err := cp.Client.EventsV1().Events(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == tunnelnodes.ServerConfigName && e.Reason == "InvalidPortEntry" && strings.Contains(e.Note, "bogus") {
				return nil
			}
		}
		return fmt.Errorf("no InvalidPortEntry event among %d events", len(evs.Items))
	})
	if got := harness.Metric(t, sync.MetricsURL, "tunnel_nodes_sync_bad_port_entries_total"); got != 1 {
		t.Errorf("bad_port_entries_total = %v, want 1", got)
	}

	// Ports removed from the config go; a port colliding with a user port is skipped.
	cp.ApplyConfigMap(t, harness.ServerConfig(map[string]string{tunnelnodes.HTTPSProxyPortsKey: "9100,9200"}))
	expectPorts("https:10250->10263", "http:10255->10264", "metrics:9200->9200", "dnat-9100:9100->10263")

	// No server config at all: no dnat ports.
	if err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Delete(ctx, tunnelnodes.ServerConfigName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expectPorts("https:10250->10263", "http:10255->10264", "metrics:9200->9200")
}

// TestSyncConcurrentWriter: another writer keeps changing another key of the
// records ConfigMap while nodes churn; neither side's change is lost.
func TestSyncConcurrentWriter(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.CreateNode(t, harness.Node{Name: "cloud-1", InternalIP: "192.168.0.1"})
	sync := harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false", "--debounce=0")
	expectRecords(t, syncBudget, cp, "192.168.0.1\tcloud-1")

	cms := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace)
	var wg gosync.WaitGroup
	const writes = 60
	wg.Go(func() {
		for i := range writes {
			// Patient: the sync (debounce 0) keeps writing too, and a writer
			// that gives up after DefaultRetry's 5 tries would be a test flake.
			patient := wait.Backoff{Steps: 100, Duration: 2 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: 100 * time.Millisecond}
			err := retry.RetryOnConflict(patient, func() error {
				cm, err := cms.Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cm.Data["other-writer"] = fmt.Sprint(i)
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Errorf("concurrent writer: %v", err)
				return
			}
		}
	})
	want := []string{"192.168.0.1\tcloud-1"}
	for i := range 30 {
		name := fmt.Sprintf("edge-%02d", i)
		cp.CreateNode(t, harness.Node{Name: name, InternalIP: fmt.Sprintf("192.168.1.%d", i+1), Edge: true})
		want = append(want, "10.96.0.9\t"+name)
	}
	wg.Wait()
	slices.Sort(want)
	expectRecords(t, syncBudget, cp, want...)
	cm, err := cms.Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["other-writer"] != fmt.Sprint(writes-1) {
		t.Errorf("the other writer's last value was lost: %q", cm.Data["other-writer"])
	}
	t.Logf("conflicts seen by the sync: %v", harness.Metric(t, sync.MetricsURL, `tunnel_nodes_sync_write_conflicts_total{object="configmap"}`))
}

// TestSyncTooLarge: records over 1 MiB are not written half-way to the
// single ConfigMap; its previous content stays, the error is reported once
// (log, event, metric), and the shards hold every record.
func TestSyncTooLarge(t *testing.T) {
	t.Parallel()
	cp, first := syncedEdgeNode(t)
	ctx := context.Background()
	first.Stop()

	// While the sync is down, 4200 nodes with 252-byte names: about 1.1 MiB of records.
	long := strings.Repeat(strings.Repeat("x", 63)+".", 3) + strings.Repeat("y", 55)
	var wg gosync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 4200; i += 8 {
				n := harness.Node{Name: fmt.Sprintf("%s%05d", long, i), Edge: true}
				if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n.Object(), metav1.CreateOptions{}); err != nil {
					t.Errorf("create node: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.ShardsNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sync := harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")
	harness.Eventually(t, 10*time.Second, func() error {
		if got := harness.Metric(t, sync.MetricsURL, `tunnel_nodes_sync_errors_total{reason="too_large"}`); got < 1 {
			return fmt.Errorf("too_large errors = %v", got)
		}
		if got := harness.Metric(t, sync.MetricsURL, `tunnel_nodes_sync_single_configmap_fits`); got != 0 {
			return fmt.Errorf("single_configmap_fits = %v", got)
		}
		return nil
	})
	// The shards hold every record (4,201 names: 512 shards).
	harness.Eventually(t, 20*time.Second, func() error {
		if got := harness.Metric(t, sync.MetricsURL, `tunnel_nodes_sync_shards`); got != 512 {
			return fmt.Errorf("shards = %v, want 512", got)
		}
		return nil
	})
	if got := records(t, cp, tunnelnodes.ConfigMapName); got != "10.96.0.9\tworker-1" {
		t.Errorf("records changed (%d bytes) although the new ones are too large", len(got))
	}
	if !strings.Contains(sync.Output(), "over the 1048576 byte ConfigMap limit") {
		t.Errorf("no clear error in the log")
	}
	harness.Eventually(t, 5*time.Second, func() error {
		evs, err := cp.Client.EventsV1().Events(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool { return e.Reason == "RecordsTooLarge" }) {
			return fmt.Errorf("no RecordsTooLarge event")
		}
		return nil
	})
}

// TestSyncRavenProfile: --profile raven writes edge-tunnel-nodes; without
// raven-cfg's enable-l7-proxy every node maps to its own address, as
// upstream's gateway-dns rules say (TestRavenSync covers the proxy on).
func TestSyncRavenProfile(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	svc := harness.TunnelService("10.96.0.44")
	svc.Name = "x-raven-proxy-internal-svc"
	cp.CreateService(t, svc)
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false", "--profile", "raven")
	expectRecordsIn(t, time.Second, cp, "edge-tunnel-nodes", "192.168.0.21\tworker-1")
}

// TestSyncLeaderElection: of two replicas one leads and writes; on SIGTERM
// it releases the Lease and the standby takes over within seconds.
func TestSyncLeaderElection(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	a := harness.StartSync(t, cp.Kubeconfig)
	b := harness.StartSync(t, cp.Kubeconfig)
	expectRecords(t, syncBudget, cp, "10.96.0.9\tworker-1")

	holder := func() string {
		l, err := cp.Client.CoordinationV1().Leases(tunnelnodes.Namespace).Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	first := holder()
	if first == "" {
		t.Fatal("no lease holder")
	}
	isLeader := func(s *harness.Sync) bool {
		return harness.Metric(t, s.MetricsURL, `leader_election_master_status{name="tunnel-nodes-sync"}`) == 1
	}
	leader, standby := a, b
	if isLeader(b) {
		leader, standby = b, a
	}
	if !isLeader(leader) || isLeader(standby) {
		t.Fatal("want exactly one leader")
	}
	if w := harness.Metric(t, standby.MetricsURL, `tunnel_nodes_sync_writes_total{object="configmap"}`); w > 0 {
		t.Errorf("the standby wrote %v times", w)
	}
	start := time.Now()
	leader.Stop() // SIGTERM: releases the Lease
	cp.CreateNode(t, harness.Node{Name: "worker-2", InternalIP: "192.168.0.22", Edge: true})
	harness.Eventually(t, 10*time.Second, func() error {
		if h := holder(); h == "" || h == first {
			return fmt.Errorf("lease still held by %q", h)
		}
		return nil
	})
	expectRecords(t, syncBudget, cp, "10.96.0.9\tworker-1", "10.96.0.9\tworker-2")
	t.Logf("standby took over and wrote in %s after SIGTERM", time.Since(start))
	if !isLeader(standby) {
		t.Error("the standby does not report itself leader")
	}

	// A crashed leader (SIGKILL) releases nothing: a new replica takes over
	// once the Lease expires (15 s lease duration).
	third := harness.StartSync(t, cp.Kubeconfig)
	second := holder()
	if err := standby.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	cp.CreateNode(t, harness.Node{Name: "worker-3", InternalIP: "192.168.0.23", Edge: true})
	harness.Eventually(t, 25*time.Second, func() error {
		if h := holder(); h == "" || h == second {
			return fmt.Errorf("lease still held by the killed replica %q", h)
		}
		return nil
	})
	expectRecords(t, syncBudget, cp, "10.96.0.9\tworker-1", "10.96.0.9\tworker-2", "10.96.0.9\tworker-3")
	t.Logf("new leader took over and wrote in %s after SIGKILL", time.Since(start))
	if !isLeader(third) {
		t.Error("the third replica does not report itself leader")
	}
}
