package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// How deploy/tunnel-nodes-sync runs the sync: it keeps kube-dns's topology
// annotation with the value install's kube-dns-topology step sets.
const (
	kubeDNSTopology    = "openyurt.io/nodepool"
	kubeDNSTopologyArg = "--kube-dns-topology=" + kubeDNSTopology
)

// TestSyncKeepsKubeDNSTopology: without --kube-dns-topology the sync makes
// no request about kube-dns at all. With it, the sync puts the topology
// annotation back within syncBudget of kubeadm upgrade's CoreDNS addon
// updating kube-dns from its template (a full Update, as
// phases/addons/dns/dns.go does), and when another writer changes its
// value; it patches only that annotation, so what other writers set stays;
// and it says so: a log line, an Event on kube-dns, a metric, and patches
// (never an update) in the audit log.
func TestSyncKeepsKubeDNSTopology(t *testing.T) {
	key, value := tunnelnodes.TopologyKeysAnnotation, kubeDNSTopology
	cp := harness.Start(t, harness.Options{AuditLog: true})
	ctx, ns := context.Background(), tunnelnodes.Namespace
	services := cp.Client.CoreV1().Services(ns)
	cp.CreateFromFile(t, filepath.Join(fixtures, "coredns.yaml")) // kube-dns as kubeadm's template makes it
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	created, err := services.Get(ctx, tunnelnodes.KubeDNSService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	template := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: created.Name, Labels: created.Labels,
		Annotations: created.Annotations}, Spec: corev1.ServiceSpec{ClusterIP: created.Spec.ClusterIP, Ports: created.Spec.Ports, Selector: created.Spec.Selector}}
	topology := func() (string, bool, error) {
		svc, err := services.Get(ctx, tunnelnodes.KubeDNSService, metav1.GetOptions{})
		if err != nil {
			return "", false, err
		}
		v, ok := svc.Annotations[key]
		return v, ok, nil
	}
	requestsOn := func(user, resource string) []harness.AuditEvent {
		return cp.AuditEvents(t, func(e harness.AuditEvent) bool { return e.User.Username == user && e.ObjectRef.Resource == resource })
	}

	// Off: the sync runs (it writes the records of a node added after its
	// start) and never asks about kube-dns, which has no annotation.
	off := harness.StartSync(t, cp.KubeconfigFor(t, "sync-off", "system:masters"), "--leader-elect=false")
	cp.CreateNode(t, harness.Node{Name: "worker-2", InternalIP: "192.168.0.22", Edge: true})
	expectRecords(t, 10*time.Second, cp, "10.96.0.9\tworker-1", "10.96.0.9\tworker-2")
	off.Stop()
	if v, ok, err := topology(); ok || err != nil {
		t.Fatalf("without --kube-dns-topology kube-dns got %s=%q (%v)", key, v, err)
	}
	for _, e := range requestsOn("sync-off", "services") {
		if e.ObjectRef.Name != tunnelnodes.ServiceName {
			t.Errorf("without --kube-dns-topology the sync sent %s services %s", e.Verb, e.ObjectRef.Name)
		}
	}

	// On: the annotation is set as the sync starts.
	on := harness.StartSync(t, cp.KubeconfigFor(t, "sync-on", "system:masters"), "--leader-elect=false", kubeDNSTopologyArg)
	harness.Eventually(t, 10*time.Second, func() error {
		if v, _, err := topology(); err != nil || v != value {
			return fmt.Errorf("kube-dns %s=%q (%v), want %q", key, v, err, value)
		}
		return nil
	})

	// kubeadm's CoreDNS addon: a full Update from its template, no
	// resourceVersion. Right after it, another writer adds its own
	// annotation, label and field, racing the restore.
	start := time.Now()
	if _, err := services.Update(ctx, template.DeepCopy(), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	other := `{"metadata":{"annotations":{"example.com/owner":"dns-team"},"labels":{"team":"dns"}},"spec":{"sessionAffinity":"ClientIP"}}`
	if _, err := services.Patch(ctx, tunnelnodes.KubeDNSService, types.MergePatchType, []byte(other), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, syncBudget, func() error {
		if v, _, err := topology(); err != nil || v != value {
			return fmt.Errorf("kube-dns %s=%q (%v) since kubeadm's update, want %q back", key, v, err, value)
		}
		return nil
	})
	t.Logf("%s back %s after kubeadm's update of kube-dns", key, time.Since(start).Round(time.Millisecond))
	svc, err := services.Get(ctx, tunnelnodes.KubeDNSService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantAnnotations := maps.Clone(template.Annotations)
	wantAnnotations["example.com/owner"], wantAnnotations[key] = "dns-team", value
	wantLabels := maps.Clone(template.Labels)
	wantLabels["team"] = "dns"
	if !maps.Equal(svc.Annotations, wantAnnotations) || !maps.Equal(svc.Labels, wantLabels) ||
		svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || len(svc.Spec.Ports) != len(template.Spec.Ports) {
		t.Errorf("kube-dns after the restore: annotations %v, labels %v, sessionAffinity %s, %d ports; want annotations %v, labels %v, ClientIP, %d ports",
			svc.Annotations, svc.Labels, svc.Spec.SessionAffinity, len(svc.Spec.Ports), wantAnnotations, wantLabels, len(template.Spec.Ports))
	}

	// Another value is put back too.
	changed := `{"metadata":{"annotations":{"` + key + `":"kubernetes.io/hostname"}}}`
	if _, err := services.Patch(ctx, tunnelnodes.KubeDNSService, types.MergePatchType, []byte(changed), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, syncBudget, func() error {
		if v, _, err := topology(); err != nil || v != value {
			return fmt.Errorf("kube-dns %s=%q (%v), want %q back", key, v, err, value)
		}
		return nil
	})

	// What it says: one restore each time, logged, counted, an Event on
	// kube-dns, and written as patches of kube-dns only.
	if n, ok := harness.WaitMetric(t, on.MetricsURL, "tunnel_nodes_sync_kube_dns_topology_restores_total", func(n float64) bool { return n == 3 }); !ok {
		t.Errorf("tunnel_nodes_sync_kube_dns_topology_restores_total %g, want 3 (start, kubeadm's update, the other value)", n)
	}
	for _, want := range []string{`"Restored the topology annotation another writer removed or changed on the kube-dns Service"`,
		`before="missing"`, `before="\"kubernetes.io/hostname\""`, "kubeadm upgrade's CoreDNS addon"} {
		if !strings.Contains(on.Output(), want) {
			t.Errorf("the sync's log lacks %s:\n%s", want, on.Output())
		}
	}
	harness.Eventually(t, 5*time.Second, func() error {
		events, err := cp.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var notes []string
		for _, e := range events.Items {
			if e.Reason == "TopologyAnnotationRestored" && e.Regarding.Kind == "Service" && e.Regarding.Name == tunnelnodes.KubeDNSService &&
				e.ReportingController == "tunnel-nodes-sync" {
				notes = append(notes, e.Note)
			}
		}
		joined := strings.Join(notes, "\n")
		if !strings.Contains(joined, "(before: missing)") || !strings.Contains(joined, `(before: "kubernetes.io/hostname")`) {
			return fmt.Errorf("TopologyAnnotationRestored events on kube-dns: %q", notes)
		}
		return nil
	})
	var patches int
	for _, e := range requestsOn("sync-on", "services") {
		write := e.Verb != "get" && e.Verb != "list" && e.Verb != "watch"
		switch {
		case write && e.ObjectRef.Name == tunnelnodes.KubeDNSService && e.Verb != "patch":
			t.Errorf("the sync sent %s services kube-dns: only patches of its annotation", e.Verb)
		case write && e.ObjectRef.Name == tunnelnodes.KubeDNSService && e.ResponseStatus.Code == 200:
			patches++
		case write && e.ObjectRef.Name != tunnelnodes.ServiceName && e.ObjectRef.Name != tunnelnodes.KubeDNSService:
			t.Errorf("the sync sent %s services %s", e.Verb, e.ObjectRef.Name)
		}
	}
	if patches != 3 {
		t.Errorf("the audit log has %d patches of kube-dns by the sync, want 3", patches)
	}
}
