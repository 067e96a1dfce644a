package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	"github.com/miekg/dns"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	outageRecords = 10000
	loadQPS       = 2000
)

// underLoad runs dnsperf and an answer checker against dns while fault
// runs and for a second after, then fails the test on any lost, failed or
// wrong answer.
func underLoad(t *testing.T, dns *harness.CoreDNS, want map[string]string, fault func()) {
	t.Helper()
	perf := harness.StartDNSPerf(t, dns.DNSAddr, harness.WriteQueries(t, slices.Collect(maps.Keys(want)), "A"), loadQPS, 10*time.Minute)
	checker := harness.StartAnswerChecker(dns.DNSAddr, want)
	fault()
	time.Sleep(time.Second)
	res := perf.Stop(t)
	firstBad := checker.Stop()
	t.Logf("dnsperf: %d sent, %d completed, %d lost, response codes %v; checker: %d answers checked, %d wrong, %d failed",
		res.Sent, res.Completed, res.Lost, res.RCodes, checker.Checked.Load(), checker.Wrong.Load(), checker.Failed.Load())
	if res.Failed() != 0 {
		t.Errorf("dnsperf: %d queries failed (lost or not NOERROR):\n%s", res.Failed(), res.Raw)
	}
	if checker.Wrong.Load()+checker.Failed.Load() != 0 {
		t.Errorf("checker: %d wrong and %d failed answers, first: %s", checker.Wrong.Load(), checker.Failed.Load(), firstBad)
	}
	if dns.Exited() {
		t.Fatalf("coredns-yurt exited:\n%s", dns.Output())
	}
}

// TestFaultAPIServerOutage: coredns-yurt serves 10k records under steady
// dnsperf load while kube-apiserver is killed for 30 s and started again on
// the same etcd: not one query fails or gets a wrong answer, and a change
// made after the restart is answered within a second of it.
func TestFaultAPIServerOutage(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	lines, want := harness.SyntheticRecords(outageRecords, "10.96.0.9")
	cp.ApplyConfigMap(t, recordsConfigMap(lines...))
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, onlyYurthosts)
	expectAnswer(t, answerBudget, dns.DNSAddr, "cloud-node-00010", "A", "192.168.0.11")

	const outage = 30 * time.Second
	underLoad(t, dns, want, func() {
		time.Sleep(3 * time.Second)
		cp.KillAPIServer(t)
		time.Sleep(outage)
		restarting := time.Now()
		cp.StartAPIServer(t)
		t.Logf("kube-apiserver back after %s of outage (start took %s)", outage, time.Since(restarting).Round(time.Millisecond))

		cm := recordsConfigMap(append(lines, "10.96.0.9\tafter-restart")...)
		if _, err := cp.Client.CoreV1().ConfigMaps(cm.Namespace).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("change after the restart: %v", err)
		}
		expectAnswer(t, storyBudget, dns.DNSAddr, "after-restart", "A", "10.96.0.9")
	})
}

// TestFaultServiceRecreatedWhileDisconnected: coredns-yurt is cut off from
// the apiserver (kube-apiserver killed, then restarted while coredns-yurt's
// connection stays cut) and meanwhile the tunnel Service is recreated with a
// new ClusterIP. Until it reconnects it keeps answering the old address;
// after, every tunnel record answers the new one.
func TestFaultServiceRecreatedWhileDisconnected(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	lines, want := harness.SyntheticRecords(1000, "10.96.0.9")
	cp.ApplyConfigMap(t, annotated(recordsConfigMap(lines...), "10.96.0.9"))
	kubeconfig, proxy := cp.ProxiedKubeconfig(t, cp.Kubeconfig)
	dns := harness.StartCoreDNS(t, kubeconfig, onlyYurthosts)
	expectAnswer(t, answerBudget, dns.DNSAddr, "edge-node-00001", "A", "10.96.0.9")

	underLoad(t, dns, want, func() {
		cp.KillAPIServer(t)
		proxy.Cut()
		cp.StartAPIServer(t)
		cp.DeleteService(t, "kube-system", "x-tunnel-server-internal-svc")
		cp.CreateService(t, harness.TunnelService("10.96.0.77"))
		time.Sleep(2 * time.Second) // answers from the old Service, checked by underLoad
	})

	proxy.Restore(t)
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for _, name := range []string{"edge-node-00001", "edge-node-00999"} {
		expectAnswer(t, time.Until(deadline), dns.DNSAddr, name, "A", "10.96.0.77")
	}
	t.Logf("answers moved to the new ClusterIP %s after the connection came back", time.Since(start).Round(time.Millisecond))
	expectAnswer(t, answerBudget, dns.DNSAddr, "cloud-node-00010", "A", "192.168.0.11")
	if strings.Contains(dns.Output(), "panic") {
		t.Errorf("coredns-yurt panicked:\n%s", dns.Output())
	}
}

// desiredRecords computes the records text from the Nodes in the API, by the
// contract's rules, independently of the sync: an edge node at the tunnel
// ClusterIP, any other at its InternalIP, lines sorted.
func desiredRecords(t *testing.T, c kubernetes.Interface, tunnelIP string) string {
	t.Helper()
	nodes, err := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, n := range nodes.Items {
		if n.Labels[tunnelnodes.EdgeNodeLabel] == "true" {
			lines = append(lines, tunnelIP+"\t"+n.Name)
			continue
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				lines = append(lines, a.Address+"\t"+n.Name)
				break
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// nodeBurst makes n random changes to nodes burst-000..059: create, delete,
// edge label on/off, new InternalIP, as fast as the apiserver takes them.
// at is called after each change with its index.
func nodeBurst(t *testing.T, c kubernetes.Interface, rng *rand.Rand, n int, at func(int)) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		name := fmt.Sprintf("burst-%03d", rng.IntN(60))
		node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			want := harness.Node{Name: name, InternalIP: fmt.Sprintf("192.168.1.%d", rng.IntN(250)+1), Edge: rng.IntN(2) == 0}.Object()
			node, err = c.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
			if err == nil {
				node.Status.Addresses = want.Status.Addresses
				_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			}
		case err != nil:
		default:
			switch rng.IntN(3) {
			case 0:
				err = c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			case 1:
				if node.Labels[tunnelnodes.EdgeNodeLabel] == "true" {
					delete(node.Labels, tunnelnodes.EdgeNodeLabel)
				} else {
					node.Labels[tunnelnodes.EdgeNodeLabel] = "true"
				}
				_, err = c.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			case 2:
				node.Status.Addresses[0].Address = fmt.Sprintf("192.168.2.%d", rng.IntN(250)+1)
				_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			t.Fatalf("burst change %d on %s: %v", i, name, err)
		}
		at(i)
	}
}

// TestFaultSyncKilledMidBurst: each replica has its own identity so the
// audit log tells their writes apart. In each round the leader is killed
// (SIGKILL) in the middle of a burst of node changes and a new replica is
// started in its place. Round 0 runs a single replica (the restarted
// process takes over); later rounds two (the standby takes over). Each time
// the takeover lands within the lease duration, the final ConfigMap equals
// the desired state computed from the Nodes, and at no time did two
// replicas write.
func TestFaultSyncKilledMidBurst(t *testing.T) {
	const (
		rounds        = 3
		burst         = 150
		leaseDuration = 4 * time.Second
		retryPeriod   = 500 * time.Millisecond
	)
	cp := harness.Start(t, harness.Options{AuditLog: true})
	ctx := context.Background()
	fast := cp.UnthrottledClient()
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	rng := rand.New(rand.NewPCG(7, 7))

	replicas := map[string]*harness.Sync{}
	killedAt := map[string]time.Time{}
	startReplica := func() {
		identity := fmt.Sprintf("sync-%d", len(replicas))
		replicas[identity] = harness.StartSync(t, cp.KubeconfigFor(t, identity, "system:masters"),
			"--leader-elect-lease-duration", leaseDuration.String(), "--leader-elect-renew-deadline", "3s",
			"--leader-elect-retry-period", retryPeriod.String())
	}
	leader := func() string {
		for id, s := range replicas {
			if _, killed := killedAt[id]; !killed &&
				harness.Metric(t, s.MetricsURL, `leader_election_master_status{name="tunnel-nodes-sync"}`) == 1 {
				return id
			}
		}
		return ""
	}
	lease := func() *coordinationv1.Lease {
		l, err := cp.Client.CoordinationV1().Leases(tunnelnodes.Namespace).Get(ctx, "tunnel-nodes-sync", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	startReplica()
	harness.Eventually(t, 10*time.Second, func() error {
		if leader() == "" {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})

	var successors []string
	for round := range rounds {
		victim := leader()
		var lastRenew time.Time
		nodeBurst(t, fast, rng, burst, func(i int) {
			if i != burst/3 {
				return
			}
			lastRenew = lease().Spec.RenewTime.Time
			if err := replicas[victim].Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killedAt[victim] = time.Now()
			startReplica()
		})
		harness.Eventually(t, 3*leaseDuration, func() error {
			if l := leader(); l == "" || l == victim {
				return fmt.Errorf("no new leader yet")
			}
			return nil
		})
		successors = append(successors, leader())
		acquired := lease().Spec.AcquireTime.Time
		takeover := acquired.Sub(lastRenew)
		t.Logf("round %d: killed leader %s mid-burst; %s took over %s after its last renewal (%s after the kill)",
			round, victim, leader(), takeover.Round(time.Millisecond), acquired.Sub(killedAt[victim]).Round(time.Millisecond))
		// client-go's standby counts the lease duration from when it saw the
		// last renewal, polling every retry period with up to 120% jitter: a
		// takeover lands within the lease duration plus two jittered polls,
		// plus the apiserver's latency in the middle of the burst.
		if takeover > leaseDuration+2*retryPeriod*22/10+time.Second {
			t.Errorf("round %d: takeover took %s, lease duration %s", round, takeover, leaseDuration)
		}
		harness.Eventually(t, 10*time.Second, func() error {
			want := desiredRecords(t, fast, "10.96.0.9")
			if got := records(t, cp, tunnelnodes.ConfigMapName); got != want {
				return fmt.Errorf("records:\n%s\nwant:\n%s", got, want)
			}
			return nil
		})
		if round == 0 {
			startReplica() // a standby from now on
		}
	}

	// At most one writer at any moment: each replica's successful writes of
	// the records ConfigMap form one interval, the intervals do not overlap,
	// and no replica wrote after it was killed.
	writes := cp.AuditEvents(t, func(e harness.AuditEvent) bool {
		return e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == tunnelnodes.ConfigMapName &&
			(e.Verb == "create" || e.Verb == "update" || e.Verb == "patch") && e.ResponseStatus.Code < 300
	})
	sort.Slice(writes, func(i, j int) bool {
		return writes[i].RequestReceivedTimestamp.Before(writes[j].RequestReceivedTimestamp)
	})
	var order []string
	perWriter := map[string]int{}
	for _, w := range writes {
		user := w.User.Username
		perWriter[user]++
		if len(order) == 0 || order[len(order)-1] != user {
			if slices.Contains(order, user) {
				t.Errorf("%s wrote again at %s after %s had written: two writers", user, w.RequestReceivedTimestamp, order[len(order)-1])
			}
			order = append(order, user)
		}
		// A request already on the wire when the process died may still be
		// received after it: allow the time a local request takes.
		if k, ok := killedAt[user]; ok && w.RequestReceivedTimestamp.After(k.Add(500*time.Millisecond)) {
			t.Errorf("%s wrote at %s, after it was killed at %s", user, w.RequestReceivedTimestamp, k)
		}
	}
	t.Logf("%d writes of the records ConfigMap, by writer in turn %v: %v", len(writes), order, perWriter)
	// Each new leader wrote; the first may have been killed before its
	// debounced first write.
	for _, s := range successors {
		if !slices.Contains(order, s) {
			t.Errorf("writers in turn %v: new leader %s never wrote", order, s)
		}
	}
}

// reloadingCorefile is watched by the reload plugin; the test edits the
// yurthosts ttl, which each answer shows.
const reloadingCorefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    ready {{.ReadyAddr}}
    prometheus {{.MetricsAddr}}
    reload 2s 1s
    yurthosts {
        kubeconfig {{.Kubeconfig}}
        ttl 5
    }
}
`

// answerTTL is the TTL of the first answer for name.
func answerTTL(server, name string) (uint32, error) {
	r, err := dns.Exchange(new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA), server)
	if err != nil {
		return 0, err
	}
	if len(r.Answer) == 0 {
		return 0, fmt.Errorf("%s: no answer (%s)", name, dns.RcodeToString[r.Rcode])
	}
	return r.Answer[0].Header().Ttl, nil
}

// TestFaultReloadUnderLoad: the Corefile is edited 20 times while dnsperf
// and the answer checker run; the reload plugin applies each edit (the
// answers' TTL shows it) without a failed or wrong answer, and goroutines
// and apiserver watches end where they started.
func TestFaultReloadUnderLoad(t *testing.T) {
	const reloads = 20
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	lines, want := harness.SyntheticRecords(outageRecords, "10.96.0.9")
	cp.ApplyConfigMap(t, recordsConfigMap(lines...))
	watchesBefore := cp.OpenWatches(t)
	server := harness.StartCoreDNS(t, cp.Kubeconfig, reloadingCorefile)
	goroutines := func() float64 { return harness.Metric(t, server.MetricsURL, "go_goroutines") }
	settle := func() { time.Sleep(time.Second) } // closed watches and connections wind down asynchronously
	settle()
	baseGoroutines, baseWatches := goroutines(), cp.OpenWatches(t)
	if baseWatches != watchesBefore+2 {
		t.Fatalf("coredns-yurt should hold 2 watches: %d, %d before it started", baseWatches, watchesBefore)
	}
	corefile, err := os.ReadFile(server.Corefile)
	if err != nil {
		t.Fatal(err)
	}

	var took []time.Duration
	underLoad(t, server, want, func() {
		for i := range reloads {
			ttl := uint32(10 + i)
			edited := strings.Replace(string(corefile), "ttl 5", fmt.Sprintf("ttl %d", ttl), 1)
			// Replaced whole, as a ConfigMap volume is: the reload plugin
			// must never read a half-written file.
			if err := os.WriteFile(server.Corefile+".new", []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(server.Corefile+".new", server.Corefile); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			harness.Eventually(t, 10*time.Second, func() error {
				got, err := answerTTL(server.DNSAddr, "edge-node-00001")
				if err != nil {
					return err
				}
				if got != ttl {
					return fmt.Errorf("reload %d: TTL %d, want %d", i, got, ttl)
				}
				return nil
			})
			took = append(took, time.Since(start))
		}
	})
	if n := strings.Count(server.Output(), "Reloading complete"); n != reloads {
		t.Errorf("coredns-yurt logged %d completed reloads, want %d", n, reloads)
	}
	settle()
	endGoroutines, endWatches := goroutines(), cp.OpenWatches(t)
	t.Logf("%d reloads (each live in %s–%s): goroutines %v → %v, apiserver watches %d → %d",
		reloads, slices.Min(took).Round(time.Millisecond), slices.Max(took).Round(time.Millisecond),
		baseGoroutines, endGoroutines, baseWatches, endWatches)
	if endWatches != baseWatches {
		t.Errorf("watches grew from %d to %d", baseWatches, endWatches)
	}
	if endGoroutines > baseGoroutines+5 {
		t.Errorf("goroutines grew from %v to %v", baseGoroutines, endGoroutines)
	}
}
