package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// ravenRecords waits, for at most syncBudget, until edge-tunnel-nodes holds
// exactly text (upstream's bytes) and the annotation of the ClusterIPs it
// was rendered for is clusterIPs; it returns the ConfigMap.
func ravenRecords(t *testing.T, cp *harness.ControlPlane, text, clusterIPs string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	harness.Eventually(t, syncBudget, func() error {
		var err error
		cm, err = cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(context.Background(), tunnelnodes.RavenConfigMapName, metav1.GetOptions{})
		switch {
		case err != nil:
			return err
		case cm.Data[tunnelnodes.ConfigMapKey] != text:
			return fmt.Errorf("records %q, want %q", cm.Data[tunnelnodes.ConfigMapKey], text)
		case cm.Annotations[tunnelnodes.TunnelClusterIPsAnnotation] != clusterIPs:
			return fmt.Errorf("%s %q, want %q", tunnelnodes.TunnelClusterIPsAnnotation, cm.Annotations[tunnelnodes.TunnelClusterIPsAnnotation], clusterIPs)
		}
		return nil
	})
	return cm
}

// editConfigMap changes a kube-system ConfigMap as another writer would
// (kubectl edit, kubectl apply), with conflict retries.
func editConfigMap(t *testing.T, cp *harness.ControlPlane, name string, edit func(*corev1.ConfigMap)) {
	t.Helper()
	ctx := context.Background()
	cms := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(cm)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("editing ConfigMap %s: %v", name, err)
	}
}

// TestRavenSync runs `run --profile raven` on a cluster shaped like Raven's
// L7 layout and walks what yurt-manager's gateway-dns controller misses:
// each records text is upstream's for the same cluster; node address changes,
// raven-cfg toggling enable-l7-proxy, a blanked (raven-proxy-dns.yaml
// applied again, openyurt#2200) or hand-edited edge-tunnel-nodes and a
// recreated proxy Service are all written within the debounce; the
// trigger-time and tunnel-cluster-ips annotations say when and for what;
// and the proxy Service, ports included, is never written.
func TestRavenSync(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	ns := tunnelnodes.Namespace
	cp.ApplyConfigMap(t, harness.RavenConfig("true"))
	svc := cp.CreateService(t, harness.RavenProxyService("10.96.100.7"))
	ports, _ := json.Marshal(svc.Spec.Ports)
	for _, n := range []harness.Node{
		{Name: "master-1", InternalIP: "192.168.0.10", ExternalIP: "203.0.113.10"},
		{Name: "worker-1", InternalIP: "192.168.1.21", Edge: true},
		{Name: "worker-2", ExternalIP: "203.0.113.22", Edge: true},
	} {
		cp.CreateNode(t, n)
	}
	// What `kubectl apply -f config/setup/raven-proxy-dns.yaml` leaves:
	// the key present, empty (YAML "tunnel-nodes: |" with no lines).
	cp.ApplyConfigMap(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tunnelnodes.RavenConfigMapName},
		Data: map[string]string{tunnelnodes.ConfigMapKey: ""}})

	started := time.Now()
	sync := harness.StartSync(t, cp.Kubeconfig, "--profile", "raven", "--leader-elect=false")

	// Proxy on: every node, cloud ones too, to the proxy ClusterIP.
	proxied := "10.96.100.7\tmaster-1\n10.96.100.7\tworker-1\n10.96.100.7\tworker-2"
	cm := ravenRecords(t, cp, proxied, "10.96.100.7")
	trigger, err := time.Parse(time.RFC3339Nano, cm.Annotations[tunnelnodes.LastChangeTriggerTimeAnnotation])
	if err != nil || trigger.Before(started.Add(-time.Second)) || trigger.After(time.Now()) {
		t.Errorf("%s = %q (%v): not the time of the change", tunnelnodes.LastChangeTriggerTimeAnnotation,
			cm.Annotations[tunnelnodes.LastChangeTriggerTimeAnnotation], err)
	}

	// raven-cfg turns the proxy off: every node to its own address,
	// InternalIP else ExternalIP; nothing was rendered for the ClusterIP.
	changed := time.Now()
	editConfigMap(t, cp, tunnelnodes.RavenGlobalConfigName, func(cm *corev1.ConfigMap) { cm.Data[tunnelnodes.RavenEnableProxyKey] = "false" })
	cm = ravenRecords(t, cp, "192.168.0.10\tmaster-1\n192.168.1.21\tworker-1\n203.0.113.22\tworker-2", "")
	if trigger, _ := time.Parse(time.RFC3339Nano, cm.Annotations[tunnelnodes.LastChangeTriggerTimeAnnotation]); trigger.Before(changed.Add(-10 * time.Millisecond)) {
		t.Errorf("trigger time %s is before the raven-cfg change at %s", trigger, changed)
	}

	// A node's address changes (upstream ignores node updates).
	updateNode(t, cp, "worker-1", func(n *corev1.Node) {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.99"}}
	}, true)
	ravenRecords(t, cp, "192.168.0.10\tmaster-1\n192.168.1.99\tworker-1\n203.0.113.22\tworker-2", "")

	// The proxy back on, written in another case (upstream compares in any case).
	editConfigMap(t, cp, tunnelnodes.RavenGlobalConfigName, func(cm *corev1.ConfigMap) { cm.Data[tunnelnodes.RavenEnableProxyKey] = "True" })
	ravenRecords(t, cp, proxied, "10.96.100.7")

	// raven-proxy-dns.yaml applied again blanks the records; a hand edit
	// points a node elsewhere: both repaired, other content kept.
	editConfigMap(t, cp, tunnelnodes.RavenConfigMapName, func(cm *corev1.ConfigMap) { cm.Data[tunnelnodes.ConfigMapKey] = "" })
	ravenRecords(t, cp, proxied, "10.96.100.7")
	editConfigMap(t, cp, tunnelnodes.RavenConfigMapName, func(cm *corev1.ConfigMap) {
		cm.Data[tunnelnodes.ConfigMapKey] = "192.168.0.10\tmaster-1"
		cm.Labels = map[string]string{"edited-by": "hand"}
	})
	if cm := ravenRecords(t, cp, proxied, "10.96.100.7"); cm.Labels["edited-by"] != "hand" {
		t.Errorf("the repair dropped the other writer's label: %v", cm.Labels)
	}

	// The sync never wrote the proxy Service: its ports are Raven's.
	now, err := cp.Client.CoreV1().Services(ns).Get(ctx, tunnelnodes.RavenServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(now.Spec.Ports); string(got) != string(ports) || now.ResourceVersion != svc.ResourceVersion {
		t.Errorf("the proxy Service was written (resourceVersion %s -> %s), ports:\n%s\nwant:\n%s", svc.ResourceVersion, now.ResourceVersion, got, ports)
	}

	// The proxy Service recreated with another ClusterIP (Raven's
	// controller does so when Gateways change): the records follow, the
	// new Service is not written either.
	cp.DeleteService(t, ns, tunnelnodes.RavenServiceName)
	ravenRecords(t, cp, "192.168.0.10\tmaster-1\n192.168.1.99\tworker-1\n203.0.113.22\tworker-2", "")
	svc = cp.CreateService(t, harness.RavenProxyService("10.96.100.8"))
	ravenRecords(t, cp, "10.96.100.8\tmaster-1\n10.96.100.8\tworker-1\n10.96.100.8\tworker-2", "10.96.100.8")
	time.Sleep(200 * time.Millisecond) // a write of the Service would have landed
	now, _ = cp.Client.CoreV1().Services(ns).Get(ctx, tunnelnodes.RavenServiceName, metav1.GetOptions{})
	if got, _ := json.Marshal(now.Spec.Ports); string(got) != string(ports) || now.ResourceVersion != svc.ResourceVersion {
		t.Errorf("the recreated proxy Service was written: ports\n%s\nwant:\n%s", got, ports)
	}
	if sync.Exited() {
		t.Fatalf("the sync exited:\n%s", sync.Output())
	}
}

// TestRavenSyncConflictSafe: another writer of edge-tunnel-nodes (as
// yurt-manager's gateway-dns controller is, until install switches it off)
// updates it over and over while raven-cfg flips the proxy: the sync's
// writes never overwrite it blindly — the other writer's last change is
// kept — and the records end as they should.
func TestRavenSyncConflictSafe(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	cp.ApplyConfigMap(t, harness.RavenConfig("true"))
	cp.CreateService(t, harness.RavenProxyService("10.96.100.7"))
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "192.168.0.10"})
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.1.21", Edge: true})
	sync := harness.StartSync(t, cp.Kubeconfig, "--profile", "raven", "--leader-elect=false", "--debounce=1ms")
	proxied := "10.96.100.7\tmaster-1\n10.96.100.7\tworker-1"
	ravenRecords(t, cp, proxied, "10.96.100.7")

	// The other writer: read, change its own label, write with the
	// resourceVersion read; its conflicts are retried as the sync's are.
	stop, done := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			cms := cp.UnthrottledClient().CoreV1().ConfigMaps(tunnelnodes.Namespace)
			if cm, err := cms.Get(ctx, tunnelnodes.RavenConfigMapName, metav1.GetOptions{}); err == nil {
				cm.Labels = map[string]string{"other-writer": fmt.Sprint(n + 1)}
				if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
					n++
				}
			}
		}
	}()
	for i := range 10 {
		enabled := []string{"false", "true"}[i%2]
		editConfigMap(t, cp, tunnelnodes.RavenGlobalConfigName, func(cm *corev1.ConfigMap) { cm.Data[tunnelnodes.RavenEnableProxyKey] = enabled })
		time.Sleep(30 * time.Millisecond)
	}
	close(stop)
	written := <-done
	cm := ravenRecords(t, cp, proxied, "10.96.100.7")
	if got := cm.Labels["other-writer"]; got != fmt.Sprint(written) {
		t.Errorf("the other writer's last label is %q, want %d: a write of the sync overwrote it", got, written)
	}
	t.Logf("other writer: %d writes; sync: %v conflicts retried", written,
		harness.Metric(t, sync.MetricsURL, `tunnel_nodes_sync_write_conflicts_total{object="configmap"}`))
}
