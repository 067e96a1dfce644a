package tunnelsync

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func node(name string, edge bool, addrs ...corev1.NodeAddress) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if edge {
		n.Labels[tunnelnodes.EdgeNodeLabel] = "true"
	}
	n.Status.Addresses = addrs
	return n
}

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}
func external(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
}

// recordsOf is desiredRecords of nodes as the node store keeps them.
func recordsOf(t testing.TB, nodes []corev1.Node, rules tunnelnodes.Rules) ([]tunnelnodes.HostEntry, recordCounts, []skippedNode) {
	t.Helper()
	store := storeOf(t, nodes)
	return desiredRecords(store.All(), store.Len(), rules)
}

// storeOf is a node store that listed nodes, edge nodes selected by
// DefaultEdgeNodeSelector.
func storeOf(t testing.TB, nodes []corev1.Node) *nodeStore {
	t.Helper()
	selector, err := labels.Parse(DefaultEdgeNodeSelector)
	if err != nil {
		t.Fatal(err)
	}
	store := newNodeStore(selector, func(workqueue.TypedRateLimitingInterface[reconcile.Request], string) {})
	objs := make([]any, len(nodes))
	for i := range nodes {
		objs[i] = &nodes[i]
	}
	if err := store.Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
	return store
}

// TestDesiredRecordsGolden pins the exact ConfigMap text for a mixed cluster:
// the bytes yurt-tunnel-server's DNS controller writes for the same nodes,
// except that a cloud node with addresses of both families gets a line for
// each (upstream: its first InternalIP only).
func TestDesiredRecordsGolden(t *testing.T) {
	nodes := []corev1.Node{
		node("master-1", false, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "master-1"}, internal("192.168.0.10"), internal("192.168.0.11")),
		node("edge-10", true, internal("10.0.0.10")),
		node("edge-2", true, internal("10.0.0.2")),
		node("node-1", true),
		node("edge-node-1", true),
		node("cloud-ext", false, external("203.0.113.7")),
		node("cloud-both", false, external("203.0.113.8"), internal("192.168.0.12")),
		node("cloud-v6", false, internal("fd00::12")),
		node("cloud-none", false),
		node("cloud-bad", false, internal("not-an-ip")),
		// Dual-stack: the first InternalIP of each family, in any order;
		// else the ExternalIP of the family; a bad address passed over.
		node("cloud-dual", false, internal("fd00::20"), internal("192.168.0.20"), internal("192.168.0.21"), internal("fd00::21")),
		node("cloud-dual-ext", false, external("2001:db8::22"), internal("192.168.0.22"), external("203.0.113.22")),
		node("cloud-bad-first", false, internal("not-an-ip"), internal("192.168.0.23")),
		node("edge-false", false, internal("192.168.0.13")),
	}
	nodes[len(nodes)-1].Labels[tunnelnodes.EdgeNodeLabel] = "false"
	entries, counts, skipped := recordsOf(t, nodes, tunnelnodes.YurtTunnelRules(netip.MustParseAddr("10.96.0.9")))
	text := tunnelnodes.RenderHosts(entries)
	golden := "10.96.0.9\tedge-10\n" +
		"10.96.0.9\tedge-2\n" +
		"10.96.0.9\tedge-node-1\n" +
		"10.96.0.9\tnode-1\n" +
		"192.168.0.10\tmaster-1\n" +
		"192.168.0.12\tcloud-both\n" +
		"192.168.0.13\tedge-false\n" +
		"192.168.0.20\tcloud-dual\n" +
		"192.168.0.22\tcloud-dual-ext\n" +
		"192.168.0.23\tcloud-bad-first\n" +
		"2001:db8::22\tcloud-dual-ext\n" +
		"203.0.113.7\tcloud-ext\n" +
		"fd00::12\tcloud-v6\n" +
		"fd00::20\tcloud-dual"
	if text != golden {
		t.Errorf("records text:\n%q\nwant:\n%q", text, golden)
	}
	if want := (recordCounts{Edge: 4, Cloud: 8, Skipped: 2}); counts != want { // nodes, not lines
		t.Errorf("counts = %+v, want %+v", counts, want)
	}
	if len(skipped) != 2 || skipped[0].Name != "cloud-bad" || skipped[1].Name != "cloud-none" { // by name
		t.Errorf("skipped = %v", skipped)
	}
}

func TestDesiredServicePorts(t *testing.T) {
	port := func(name string, p, target int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: p, TargetPort: intstr.FromInt32(target)}
	}
	current := []corev1.ServicePort{
		port("https", 10250, 10263), port("dnat-8080", 8080, 10264), port("http", 10255, 10264),
		port("metrics", 9200, 9200), port("dnat-9100", 9100, 10264),
	}
	mappings := []tunnelnodes.PortMapping{{Port: 9100, TargetPort: 10263}, {Port: 9200, TargetPort: 10263}, {Port: 9445, TargetPort: 10263}}
	got, conflicts := desiredServicePorts(current, mappings)
	want := []corev1.ServicePort{
		port("https", 10250, 10263), port("http", 10255, 10264), port("metrics", 9200, 9200),
		port("dnat-9100", 9100, 10263), port("dnat-9445", 9445, 10263),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ports = %v\nwant %v", got, want)
	}
	if len(conflicts) != 1 || conflicts[0].Port != 9200 {
		t.Errorf("conflicts = %v", conflicts)
	}
	if !portsEqual(want, got) || portsEqual(current, got) {
		t.Error("portsEqual is wrong")
	}
}
