package realcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const ravenFixtures = "../testdata/raven"

// TestRavenInstallAndRevert: on the cluster laid out as a Raven L7 user has
// it (upstream's raven-proxy-dns.yaml applied, the L7 proxy on, the records
// as yurt-manager's gateway-dns writes them), install --profile raven swaps
// raven-proxy-dns for coredns-yurt without a query going unanswered or
// answered wrong, every node name answers the proxy ClusterIP from every
// node, a node added is answered at once, and revert restores every object
// exactly, again without a failed answer.
func TestRavenInstallAndRevert(t *testing.T) {
	ctx := context.Background()
	proxyIPs := setUpRaven(t)
	proxyIP := proxyIPs[0]
	kubeadmBefore, before := kubeadmState(t), ravenState(t)
	server := serviceIP(t, "raven-proxy-dns")
	names := []string{kc.Master().Name, kc.Node("worker-1").Name}
	expectEveryName(t, server, names, "A", proxyIP, time.Minute)

	probe := startDNSProbeOf(server, "worker-1", proxyIP, kc.Nodes)
	_, err := runSync(t, "install", "--profile", "raven")
	probe.finish(t, "install --profile raven")
	if err != nil {
		t.Fatalf("install --profile raven: %v", err)
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=raven-proxy-dns"})
	if err != nil || len(pods.Items) != 1 || !strings.Contains(pods.Items[0].Spec.Containers[0].Image, "coredns-yurt") {
		t.Fatalf("raven-proxy-dns pods after install (%v): %+v", err, pods)
	}
	expectEveryName(t, server, names, "A", proxyIP, 0)
	// The proxy Service is dual-stack: coredns-yurt answers AAAA with its
	// IPv6 ClusterIP, where gateway-dns's records had IPv4 alone.
	expectEveryName(t, server, names, "AAAA", proxyIPs[1], 0)

	// A node added: the sync writes it, yurthosts answers it.
	if err := cluster.CreateNodeObject(ctx, cs, "worker-2", "198.51.100.12", map[string]string{tunnelnodes.EdgeNodeLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	expectEveryName(t, server, []string{"worker-2"}, "A", proxyIP, 5*time.Second)
	expectEveryName(t, server, []string{"worker-2"}, "AAAA", proxyIPs[1], 0)
	t.Logf("node worker-2 added: raven-proxy-dns answered it from every node within %s", time.Since(added).Round(time.Millisecond))
	if err := cs.CoreV1().Nodes().Delete(ctx, "worker-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	probe = startDNSProbeOf(server, "worker-1", proxyIP, kc.Nodes)
	_, err = runSync(t, "revert", "--profile", "raven")
	probe.finish(t, "revert --profile raven")
	if err != nil {
		t.Fatalf("revert --profile raven: %v", err)
	}
	for what, diffs := range map[string][]string{"Raven's": diffState(before, ravenState(t)), "kubeadm's": diffState(kubeadmBefore, kubeadmState(t))} {
		if len(diffs) > 0 {
			t.Errorf("after revert, %s objects differ from before install:\n%s", what, strings.Join(diffs, "\n"))
		}
	}
	for _, gone := range []error{
		getErr(cs.CoreV1().Pods("kube-system").Get(ctx, "raven-proxy-dns-handover", metav1.GetOptions{})),
		getErr(cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "raven-proxy-dns-yurt", metav1.GetOptions{})),
		getErr(cs.AppsV1().Deployments("kube-system").Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})),
		getErr(cs.CoordinationV1().Leases("kube-system").Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(gone) {
			t.Errorf("left after revert: %v", gone)
		}
	}
	expectEveryName(t, server, names, "A", proxyIP, 0)
}

// setUpRaven lays the cluster out as Raven's L7 docs leave it (master-1 is
// labelled a cloud node from its join, yurt-manager runs its gateway-dns
// controller): raven-cfg with the proxy on, the proxy Service,
// edge-tunnel-nodes as yurt-manager's gateway-dns writes it (every node to
// the proxy ClusterIP), upstream's raven-proxy-dns.yaml applied with the
// cluster's CoreDNS image. The proxy Service is made dual-stack, as an
// operator of a dual-stack cluster would make it (yurt-manager creates it
// SingleStack); its ClusterIPs are returned, IPv4 first. Everything goes at
// the end of the test.
func setUpRaven(t *testing.T) (proxyIPs []string) {
	ctx := context.Background()

	if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, harness.RavenConfig("true"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.CoreV1().ConfigMaps("kube-system").Delete(ctx, tunnelnodes.RavenGlobalConfigName, metav1.DeleteOptions{})
	})
	proxy := harness.RavenProxyService("")
	dual := corev1.IPFamilyPolicyRequireDualStack
	proxy.Spec.IPFamilyPolicy, proxy.Spec.IPFamilies = &dual, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	svc, err := cs.CoreV1().Services("kube-system").Create(ctx, proxy, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.CoreV1().Services("kube-system").Delete(ctx, tunnelnodes.RavenServiceName, metav1.DeleteOptions{})
	})
	proxyIP := svc.Spec.ClusterIP

	stock, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(ravenFixtures, "raven-proxy-dns.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's rules with the proxy on: every node, sorted, to the proxy's ClusterIP.
	records := proxyIP + "\tmaster-1\n" + proxyIP + "\tworker-1"
	applied := strings.Replace(string(manifest), "image: coredns/coredns:1.9.3", "image: "+stock.Spec.Template.Spec.Containers[0].Image, 1)
	applied = strings.Replace(applied, "  tunnel-nodes: |\n", "  tunnel-nodes: |\n    "+strings.ReplaceAll(records, "\n", "\n    ")+"\n", 1)
	file := filepath.Join(t.TempDir(), "raven.yaml")
	if err := os.WriteFile(file, []byte(applied), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kc.Kubectl(ctx, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply of raven-proxy-dns.yaml: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := kc.Kubectl(ctx, "delete", "--wait", "-f", file); err != nil {
			t.Errorf("deleting Raven's objects: %v\n%s", err, out)
		}
	})
	if out, err := kc.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "deployment/raven-proxy-dns", "--timeout=2m"); err != nil {
		t.Fatalf("raven-proxy-dns not rolled out: %v\n%s", err, out)
	}
	return svc.Spec.ClusterIPs
}

// ravenState is what install --profile raven changes and revert restores.
func ravenState(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	state := map[string]string{}
	add := func(key string, v any, err error) {
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		data, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		state[key] = string(data)
	}
	for _, name := range []string{"raven-proxy-dns", "yurt-manager"} {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
		add("deployment/"+name, map[string]any{"spec": d.Spec, "labels": d.Labels}, err)
	}
	for _, name := range []string{"raven-proxy-dns", tunnelnodes.RavenGlobalConfigName} {
		cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{})
		add("configmap/"+name, map[string]any{"data": cm.Data, "labels": cm.Labels}, err)
	}
	for _, name := range []string{"raven-proxy-dns", tunnelnodes.RavenServiceName} {
		svc, err := cs.CoreV1().Services("kube-system").Get(ctx, name, metav1.GetOptions{})
		add("service/"+name, map[string]any{"spec": svc.Spec, "labels": svc.Labels}, err)
	}
	return state
}

func serviceIP(t *testing.T, name string) string {
	t.Helper()
	svc, err := cs.CoreV1().Services("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// expectEveryName: every node asks server for each name's qtype and gets want,
// all within one limit counted from the call (at once when it is 0).
func expectEveryName(t *testing.T, server string, names []string, qtype, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, n := range kc.Nodes {
		for _, name := range names {
			for {
				r, err := n.Dig(context.Background(), server, name, qtype, "+time=1", "+tries=1")
				got := strings.Join(r.Data(qtype), ",")
				if err == nil && got == want {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("from %s, dig @%s %s %s = %q (%s, %v), want %s", n.Name, server, name, qtype, got, r.Status, err, want)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

func getErr[T any](_ T, err error) error { return err }
