package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// throughYurthubCorefile is the node-local cache's yurthosts block on a
// node that runs yurthub, with no kubeconfig: were yurthub not used, the
// plugin would look for the in-cluster service account, which a test
// process does not have, and the server would not start.
const throughYurthubCorefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    health {{.HealthAddr}}
    prometheus {{.MetricsAddr}}
    yurthosts {
        shards yurtdns-records
        yurthub {{.YurthubProxy}} {{.YurthubHealthz}}
    }
}
`

// TestRecordsThroughYurthubAfterCutAndReboot runs coredns-yurt with
// `yurthub` in front of OpenYurt v1.7.0's yurthub (edge mode, its default
// heartbeats) on an edge node whose link to the cloud a test proxy cuts:
//  1. online: the records are read through yurthub's plain-HTTP proxy with
//     no credentials; the apiserver sees the node (system:node:edge-1);
//  2. the link is cut and a node is added to the records meanwhile; the
//     node "reboots": yurthub and coredns-yurt restart while cut off, and
//     coredns-yurt is ready from yurthub's cache, without the new node;
//  3. the link is back: the new node answers within reconnectBound of
//     yurthub being healthy again (its gauge turning 1); measured from the
//     link's return too. No token is involved, so nothing waits for the
//     kubelet's next sync of the pod.
func TestRecordsThroughYurthubAfterCutAndReboot(t *testing.T) {
	cp := harness.Start(t, harness.Options{AuditLog: true})
	cp.CreateNode(t, harness.Node{Name: "edge-1", InternalIP: "127.0.0.1", Edge: true, Ready: true,
		Labels: map[string]string{"apps.openyurt.io/nodepool": "edge-pool"}})
	cp.CreateService(t, harness.TunnelService(edgeTunnelV4))
	records, err := deploy.Render(deploy.Records)
	if err != nil {
		t.Fatal(err)
	}
	cp.Apply(t, records, false)
	lines := []string{edgeTunnelV4 + "\tedge-1", "192.168.0.10\tmaster-1"}
	applyShards(t, cp, lines, edgeTunnelV4)
	hub := cp.StartYurthub(t, "edge-1")
	corefile := strings.NewReplacer("{{.YurthubProxy}}", hub.ProxyURL, "{{.YurthubHealthz}}", hub.HealthzURL).Replace(throughYurthubCorefile)

	// 1. Online.
	dns := harness.StartCoreDNS(t, "", corefile)
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-1", "A", edgeTunnelV4)
	shardReads := func(since time.Time) []harness.AuditEvent {
		return cp.AuditEvents(t, func(e harness.AuditEvent) bool {
			return strings.HasPrefix(e.UserAgent, "coredns/") && e.ObjectRef.Resource == "configmaps" &&
				e.ObjectRef.Namespace == tunnelnodes.ShardsNamespace && e.Verb == "list" && !e.RequestReceivedTimestamp.Before(since)
		})
	}
	reads := shardReads(time.Time{})
	if len(reads) == 0 {
		t.Fatal("online: the apiserver saw no list of the shards by coredns-yurt")
	}
	for _, e := range reads {
		if e.User.Username != "system:node:edge-1" || e.ResponseStatus.Code != 200 {
			t.Errorf("online: shards listed as %s (%d), want the node system:node:edge-1 (200)", e.User.Username, e.ResponseStatus.Code)
		}
	}

	// 2. Cut off, a node added meanwhile, the edge node restarted.
	hub.Link.Cut()
	harness.Eventually(t, 2*hub.HeartbeatInterval+5*time.Second, func() error {
		if hub.CloudHealthy(t) {
			return fmt.Errorf("yurthub still considers %s healthy", hub.ServerAddr)
		}
		return nil
	})
	lines = append(lines, edgeTunnelV4+"\tedge-during-cut")
	applyShards(t, cp, lines, edgeTunnelV4)
	dns.Stop()
	hub.Restart(t)
	dns = harness.StartCoreDNS(t, "", corefile, harness.CoreDNSOptions{ReadyTimeout: 10 * time.Second})
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-1", "A", edgeTunnelV4)
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-during-cut", "A", "NXDOMAIN")

	// 3. The link is back.
	hub.Link.Restore(t)
	restored := time.Now()
	limit := time.Duration(hub.HealthyThreshold+1)*hub.HeartbeatInterval + 10*time.Second
	harness.Eventually(t, limit, func() error {
		if v := harness.Metric(t, hub.MetricsURL, hub.HealthySample()); v != 1 {
			return fmt.Errorf("yurthub not healthy again (%s = %v)", hub.HealthySample(), v)
		}
		return nil
	})
	healthy := time.Now()
	got := firstAnswer(dns.DNSAddr, "edge-during-cut", "A", edgeTunnelV4, healthy, limit)
	t.Logf("link back: yurthub healthy after %s; the node added during the cut answered %s after that (%s after the link)",
		healthy.Sub(restored).Round(time.Millisecond), got.after.Round(time.Millisecond), (healthy.Sub(restored) + got.after).Round(time.Millisecond))
	if got.err != nil || got.after > reconnectBound {
		t.Errorf("the node added during the cut answered %s after yurthub was healthy again, want within %s (%v)",
			got.after.Round(time.Millisecond), reconnectBound, got.err)
	}
	for _, e := range shardReads(restored) {
		if e.User.Username != "system:node:edge-1" {
			t.Errorf("after the cut: shards listed as %s, want the node system:node:edge-1", e.User.Username)
		}
	}
}

// TestNodesMayReadTheRecords: with deploy/records and deploy/node-local-dns's
// grant to the nodes, and no other grant (not upstream's yurt-hub
// ClusterRole nor the Node authorizer's, which a cluster has besides),
// coredns-yurt as a node (system:node:edge-9 in system:nodes: the identity
// yurthub forwards a request without credentials with) syncs the shards and
// the tunnel Service and answers; the node may read no other ConfigMap of
// kube-system.
func TestNodesMayReadTheRecords(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	records, err := deploy.Render(deploy.Records)
	if err != nil {
		t.Fatal(err)
	}
	cp.Apply(t, records, false)
	nodeLocal, err := deploy.Render(deploy.NodeLocalDNS)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range nodeLocal {
		if o.GetKind() == "Role" || o.GetKind() == "RoleBinding" {
			cp.Apply(t, []*unstructured.Unstructured{o}, false)
		}
	}
	cp.CreateService(t, harness.TunnelService(edgeTunnelV4))
	applyShards(t, cp, []string{edgeTunnelV4 + "\tedge-9", "192.168.0.10\tmaster-1"}, edgeTunnelV4)

	node := cp.KubeconfigFor(t, "system:node:edge-9", "system:nodes")
	dns := harness.StartCoreDNS(t, node, `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    health {{.HealthAddr}}
    prometheus {{.MetricsAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
        shards yurtdns-records
    }
}
`)
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-9", "A", edgeTunnelV4)
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "A", "192.168.0.10")

	cfg, err := clientcmd.BuildConfigFromFlags("", node)
	if err != nil {
		t.Fatal(err)
	}
	asNode := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := asNode.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the node read ConfigMap kube-system/coredns: %v, want forbidden", err)
	}
	if _, err := asNode.CoreV1().ConfigMaps(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the node listed kube-system's ConfigMaps: %v, want forbidden", err)
	}
}
