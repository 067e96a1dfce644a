package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	"github.com/miekg/dns"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	edgeRecords  = 1000
	edgeTunnelV4 = "10.96.0.9"
	edgeTunnelV6 = "fd00:10:96::9"
)

// edgeCorefile is the DaemonSet's Corefile on an edge node as install
// writes it: yurthosts (the records' shards) falling through to the
// kubernetes plugin, both reading through yurthub.
const edgeCorefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    health {{.HealthAddr}}
    prometheus {{.MetricsAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
        shards yurtdns-records
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}}
    }
}
`

// asInImage runs coredns-yurt as the image's /coredns: with a kubeconfig
// the kubernetes plugin's User-Agent is client-go's default, the
// executable's name, and yurthub caches only for the agents it knows.
var asInImage = harness.CoreDNSOptions{Executable: "coredns"}

// TestEdgeAutonomyThroughYurthub runs coredns-yurt (yurthosts and the
// kubernetes plugin) on an edge node's yurthub (OpenYurt v1.7.0, edge mode,
// default cache agents) in front of the harness apiserver, with the pod's
// ServiceAccount token, through the phases of a cloud outage:
//  1. online: ready, every record answered, a change answered within 1 s;
//  2. apiserver killed: answers unchanged under dnsperf load, not one failed
//     or wrong, through yurthub going offline;
//  3. coredns-yurt killed and restarted while the apiserver is still down:
//     ready within 2 s from yurthub's cache alone; every A and AAAA right (a
//     dual-stack tunnel Service), kubernetes.default.svc.cluster.local too;
//  4. apiserver back: a change is answered once yurthub's health check lets
//     it through (two heartbeats of 10 s, its defaults); measured.
func TestEdgeAutonomyThroughYurthub(t *testing.T) {
	cp := harness.Start(t, harness.Options{DualStack: true})
	cp.CreateNode(t, harness.Node{Name: "edge-1", InternalIP: "127.0.0.1", Edge: true, Ready: true,
		Labels: map[string]string{"apps.openyurt.io/nodepool": "edge-pool"}})
	cp.CreateService(t, harness.TunnelService(edgeTunnelV4, edgeTunnelV6))
	lines, want := harness.SyntheticRecords(edgeRecords, edgeTunnelV4)
	grantCoreDNS(t, cp)
	// The records as shards only (no single ConfigMap to fall back to): one
	// label-selected list and watch, which yurthub must cache.
	shardCount := applyShards(t, cp, lines, edgeTunnelV4)
	token := cp.ServiceAccountToken(t, tunnelnodes.Namespace, "coredns")

	hub := cp.StartYurthub(t, "edge-1")
	kubeconfig := hub.Kubeconfig(t, token)

	// 1. Online.
	harness.Binary(t, "coredns-yurt") // built before the clock starts
	started := time.Now()
	server := harness.StartCoreDNS(t, kubeconfig, edgeCorefile, asInImage)
	t.Logf("online: ready through yurthub in %s", time.Since(started).Round(time.Millisecond))
	checkEdgeRecords(t, server.DNSAddr, want)
	if err := answers(server.DNSAddr, "kubernetes.default.svc.cluster.local.", dns.TypeA, "10.96.0.1"); err != nil {
		t.Errorf("online: kubernetes plugin: %v", err)
	}
	changed := time.Now()
	lines = append(lines, edgeTunnelV4+"\tedge-online")
	applyShards(t, cp, lines, edgeTunnelV4)
	want["edge-online"] = edgeTunnelV4
	harness.Eventually(t, time.Second, func() error { return answers(server.DNSAddr, "edge-online.", dns.TypeA, edgeTunnelV4) })
	t.Logf("online: change answered %s after the write", time.Since(changed).Round(time.Millisecond))

	// 2. The apiserver goes away under load, through yurthub's switch to
	// its cache (at its next heartbeat).
	underLoad(t, server, want, func() {
		time.Sleep(2 * time.Second)
		cp.KillAPIServer(t)
		killed := time.Now()
		harness.Eventually(t, 2*hub.HeartbeatInterval+5*time.Second, func() error {
			if hub.CloudHealthy(t) {
				return fmt.Errorf("yurthub still considers %s healthy", hub.ServerAddr)
			}
			return nil
		})
		t.Logf("apiserver down: yurthub offline %s after the kill", time.Since(killed).Round(time.Millisecond))
		time.Sleep(2 * time.Second)
	})

	// 3. coredns-yurt restarted while the apiserver is down.
	server.Stop()
	started = time.Now()
	server = harness.StartCoreDNS(t, kubeconfig, edgeCorefile, harness.CoreDNSOptions{Executable: asInImage.Executable, ReadyTimeout: 10 * time.Second})
	ready := time.Since(started)
	t.Logf("offline restart: ready %s after start", ready.Round(time.Millisecond))
	if ready > 2*time.Second {
		t.Errorf("offline restart: ready after %s, want within 2 s from yurthub's cache", ready.Round(time.Millisecond))
	}
	checkEdgeRecords(t, server.DNSAddr, want)
	if got := harness.Metric(t, server.MetricsURL, `coredns_yurthosts_shards{configmap="kube-system/yurt-tunnel-nodes"}`); got != float64(shardCount) {
		t.Errorf("offline restart: %v shards served, want %d", got, shardCount)
	}
	if err := answers(server.DNSAddr, "kubernetes.default.svc.cluster.local.", dns.TypeA, "10.96.0.1"); err != nil {
		t.Errorf("offline restart: kubernetes plugin: %v", err)
	}
	if hub.CloudHealthy(t) {
		t.Fatal("yurthub back online during the offline restart: the answers did not come from its cache alone")
	}

	// 4. The apiserver is back: yurthub proxies again after HealthyThreshold
	// good heartbeats, its local watches end within 2 s of that, the
	// reflectors relist.
	cp.StartAPIServer(t)
	back := time.Now()
	lines = append(lines, edgeTunnelV4+"\tedge-reconnected")
	applyShards(t, cp, lines, edgeTunnelV4)
	limit := time.Duration(hub.HealthyThreshold+1)*hub.HeartbeatInterval + 5*time.Second
	harness.Eventually(t, limit, func() error {
		return answers(server.DNSAddr, "edge-reconnected.", dns.TypeA, edgeTunnelV4)
	})
	t.Logf("apiserver back: a change made as it came back answered after %s (yurthub: %d heartbeats of %s)",
		time.Since(back).Round(time.Millisecond), hub.HealthyThreshold, hub.HeartbeatInterval)
}

// grantCoreDNS gives kube-system/coredns kubeadm's stock ClusterRole,
// yurtdns's Role (deploy/coredns-yurt/rbac) and the shards' namespace with
// its reader Role (deploy/records, as applied).
func grantCoreDNS(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	records, err := deploy.Render(deploy.Records)
	if err != nil {
		t.Fatal(err)
	}
	cp.Apply(t, records, false)
	role, binding := stockCoreDNSRBAC("coredns")
	rbac := cp.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ours := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "yurtdns:coredns"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{tunnelnodes.ConfigMapName}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{tunnelnodes.ServiceName}, Verbs: []string{"get", "list", "watch"}},
	}}
	if _, err := rbac.Roles(tunnelnodes.Namespace).Create(ctx, ours, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(tunnelnodes.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: "yurtdns:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ours.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tunnelnodes.Namespace, Name: "coredns"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkEdgeRecords asks for A and AAAA of every name: an edge name answers
// the tunnel Service's two ClusterIPs, a cloud name its IPv4 address and no
// AAAA (NODATA).
func checkEdgeRecords(t *testing.T, server string, want map[string]string) {
	t.Helper()
	checked := 0
	for name, v4 := range want {
		var v6 []string
		if v4 == edgeTunnelV4 {
			v6 = []string{edgeTunnelV6}
		}
		for _, q := range []struct {
			qtype uint16
			want  []string
		}{{dns.TypeA, []string{v4}}, {dns.TypeAAAA, v6}} {
			if err := answers(server, name+".", q.qtype, q.want...); err != nil {
				t.Fatal(err)
			}
			checked++
		}
	}
	t.Logf("%d answers checked (A and AAAA of %d names)", checked, len(want))
}

// answers asks server once and compares the answer's addresses with want
// (none: NOERROR without answers).
func answers(server, name string, qtype uint16, want ...string) error {
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(new(dns.Msg).SetQuestion(name, qtype), server)
	if err != nil {
		return fmt.Errorf("%s %s: %v", name, dns.TypeToString[qtype], err)
	}
	var got []string
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			got = append(got, rr.A.String())
		case *dns.AAAA:
			got = append(got, rr.AAAA.String())
		}
	}
	if r.Rcode != dns.RcodeSuccess || fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("%s %s: %s %v, want %v", name, dns.TypeToString[qtype], dns.RcodeToString[r.Rcode], got, want)
	}
	return nil
}
