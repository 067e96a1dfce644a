package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// backWithin is how soon after kube-apiserver is back a Node made then
// must be in the records (issue 50).
const backWithin = 5 * time.Second

// outageReplica is a sync replica with an identity of its own, so the
// audit log tells its writes apart.
type outageReplica struct {
	user string
	*harness.Sync
	pid int
}

// startReplica starts a sync as user (leader election on, the
// Deployment's timings unless args say otherwise) with kubeconfig.
func startReplica(t *testing.T, user, kubeconfig string, args ...string) *outageReplica {
	t.Helper()
	s := harness.StartSync(t, kubeconfig, args...)
	return &outageReplica{user: user, Sync: s, pid: s.Pid()}
}

// waitLeader waits until one of replicas leads, and returns it.
func waitLeader(t *testing.T, replicas []*outageReplica) *outageReplica {
	t.Helper()
	var leader *outageReplica
	harness.Eventually(t, 30*time.Second, func() error {
		if leader = leaderOf(t, replicas); leader == nil {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})
	return leader
}

// leaderOf is the replica that reports itself leading (nil: none).
func leaderOf(t *testing.T, replicas []*outageReplica) *outageReplica {
	t.Helper()
	for _, r := range replicas {
		if !r.Exited() && harness.Metric(t, r.MetricsURL, `leader_election_master_status{name="tunnel-nodes-sync"}`) == 1 {
			return r
		}
	}
	return nil
}

// inShards reports whether line is in a stored shard of the records.
func inShards(t harness.TB, cp *harness.ControlPlane, line string) bool {
	t.Helper()
	for _, cm := range shards(t, cp) {
		if slices.Contains(strings.Split(cm.Data[tunnelnodes.ConfigMapKey], "\n"), line) {
			return true
		}
	}
	return false
}

// waitInShards waits for line in the shards and returns when it was seen.
func waitInShards(t *testing.T, cp *harness.ControlPlane, within time.Duration, line string) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for !inShards(t, cp, line) {
		if time.Now().After(deadline) {
			t.Fatalf("%q not in the records' shards after %s", line, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Now()
}

// recordWrites are the successful writes of the records (single ConfigMap
// and shards) in the audit log, oldest first.
func recordWrites(t *testing.T, cp *harness.ControlPlane) []harness.AuditEvent {
	t.Helper()
	writes := cp.AuditEvents(t, func(e harness.AuditEvent) bool {
		records := e.ObjectRef.Namespace == tunnelnodes.ShardsNamespace ||
			e.ObjectRef.Namespace == tunnelnodes.Namespace && e.ObjectRef.Name == tunnelnodes.ConfigMapName
		return e.ObjectRef.Resource == "configmaps" && records && e.ResponseStatus.Code < 300 &&
			slices.Contains([]string{"create", "update", "patch", "delete"}, e.Verb)
	})
	sort.Slice(writes, func(i, j int) bool {
		return writes[i].RequestReceivedTimestamp.Before(writes[j].RequestReceivedTimestamp)
	})
	return writes
}

// writersInTurn are the users that wrote, in turn (a user once per run of
// its writes), and each one's writes; a user twice in turns is two writers.
func writersInTurn(writes []harness.AuditEvent) (turns []string, count map[string]int) {
	count = map[string]int{}
	for _, w := range writes {
		user := w.User.Username
		count[user]++
		if len(turns) == 0 || turns[len(turns)-1] != user {
			turns = append(turns, user)
		}
	}
	return turns, count
}

// checkAlive fails the test unless every replica is still the process it
// started as and its liveness probe answers.
func checkAlive(t *testing.T, replicas []*outageReplica, when string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	for _, r := range replicas {
		if r.Exited() || r.Pid() != r.pid {
			t.Fatalf("%s: %s (pid %d) exited:\n%s", when, r.user, r.pid, r.Output())
		}
		resp, err := client.Get(r.HealthzURL)
		if err != nil {
			t.Errorf("%s: %s's liveness probe: %v", when, r.user, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s's liveness probe answered %s", when, r.user, resp.Status)
		}
	}
}

// outageFixture is a control plane with an audit log, the tunnel Service,
// the shards' namespace and one edge node.
func outageFixture(t *testing.T) *harness.ControlPlane {
	t.Helper()
	cp := harness.Start(t, harness.Options{AuditLog: true})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.ShardsNamespace}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	return cp
}

// TestSyncRidesOutAPIServerOutage (issue 50): two sync replicas with the
// Deployment's leader election timings; kube-apiserver is killed for 45 s,
// three times the lease duration, and started again. Neither process
// exits or fails its liveness probe, a Node created as soon as the
// apiserver is back is in the records' shards within 5 s, and the audit
// log shows one writer at a time: after the outage only the replica that
// holds the Lease writes.
func TestSyncRidesOutAPIServerOutage(t *testing.T) {
	const outage = 45 * time.Second
	cp := outageFixture(t)
	var replicas []*outageReplica
	for _, user := range []string{"sync-0", "sync-1"} {
		replicas = append(replicas, startReplica(t, user, cp.KubeconfigFor(t, user, "system:masters")))
	}
	before := waitLeader(t, replicas)
	waitInShards(t, cp, syncBudget, "10.96.0.9\tworker-1")

	cp.KillAPIServer(t)
	killed := time.Now()
	for time.Since(killed) < outage {
		checkAlive(t, replicas, fmt.Sprintf("%s into the outage", time.Since(killed).Round(time.Second)))
		time.Sleep(time.Second)
	}
	cp.StartAPIServer(t)
	back := time.Now()
	cp.CreateNode(t, harness.Node{Name: "after-outage", InternalIP: "192.168.0.31", Edge: true})
	created := time.Now()
	written := waitInShards(t, cp, 30*time.Second, "10.96.0.9\tafter-outage")
	after := leaderOf(t, replicas)
	if after == nil {
		t.Fatal("no replica leads after the outage")
	}
	t.Logf("kube-apiserver killed for %s (leader before: %s); Node created %s after it was back; in the shards %s after it was back (%s after its creation); leader after: %s",
		outage, before.user, created.Sub(back).Round(time.Millisecond), written.Sub(back).Round(time.Millisecond),
		written.Sub(created).Round(time.Millisecond), after.user)
	if d := written.Sub(back); d > backWithin {
		t.Errorf("the Node made after the outage was written %s after the apiserver was back, want within %s", d.Round(time.Millisecond), backWithin)
	}
	checkAlive(t, replicas, "after the outage")
	expectRecords(t, syncBudget, cp, "10.96.0.9\tafter-outage", "10.96.0.9\tworker-1")

	writes := recordWrites(t, cp)
	turns, count := writersInTurn(writes)
	t.Logf("%d writes of the records, by writer in turn %v: %v", len(writes), turns, count)
	for i, user := range turns {
		if slices.Contains(turns[:i], user) {
			t.Errorf("writers in turn %v: %s wrote again after another replica had: two writers", turns, user)
		}
	}
	var afterBack []string
	for _, w := range writes {
		if w.RequestReceivedTimestamp.After(back) && !slices.Contains(afterBack, w.User.Username) {
			afterBack = append(afterBack, w.User.Username)
		}
	}
	if !slices.Equal(afterBack, []string{after.user}) {
		t.Errorf("after the outage %v wrote, want only the leader %s", afterBack, after.user)
	}
}

// TestSyncWaitsForAPIServerAtStart (issue 50): a sync started while
// kube-apiserver is down does not exit: its liveness probe answers, it
// says every 10 s which server it waits for, and once the apiserver is
// back it becomes ready and writes a Node made then within 5 s.
func TestSyncWaitsForAPIServerAtStart(t *testing.T) {
	cp := outageFixture(t)
	cp.KillAPIServer(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	probes := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	s := &harness.Sync{
		Process: harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), "run", "--kubeconfig", cp.Kubeconfig,
			"--metrics-bind-address", metrics, "--health-probe-bind-address", probes),
		MetricsURL: "http://" + metrics + "/metrics", HealthzURL: "http://" + probes + "/healthz", ReadyzURL: "http://" + probes + "/readyz",
	}
	replica := []*outageReplica{{user: "sync", Sync: s, pid: s.Pid()}}
	started := time.Now()
	// Its probes are served before anything waits for the apiserver: the
	// kubelet's first liveness probe comes seconds after the start.
	s.WaitHTTP200(t, s.HealthzURL, 5*time.Second)
	for time.Since(started) < 25*time.Second {
		checkAlive(t, replica, fmt.Sprintf("%s after its start", time.Since(started).Round(time.Second)))
		time.Sleep(time.Second)
	}
	server := strings.TrimSuffix(cp.Config.Host, "/")
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	waiting := strings.Count(s.Output(), `"Waiting for the apiserver" server="`+server+`"`)
	if waiting < 3 {
		t.Errorf("%d log lines say it waits for %s in 25 s, want one at 1 s and then every 10 s:\n%s", waiting, server, s.Output())
	}

	cp.StartAPIServer(t)
	back := time.Now()
	cp.CreateNode(t, harness.Node{Name: "after-start", InternalIP: "192.168.0.31", Edge: true})
	written := waitInShards(t, cp, 30*time.Second, "10.96.0.9\tafter-start")
	t.Logf("started %s before the apiserver was back; %d waiting lines; the Node made then written %s after it was back",
		back.Sub(started).Round(time.Second), waiting, written.Sub(back).Round(time.Millisecond))
	if d := written.Sub(back); d > backWithin {
		t.Errorf("written %s after the apiserver was back, want within %s", d.Round(time.Millisecond), backWithin)
	}
	s.WaitHTTP200(t, s.ReadyzURL, 5*time.Second)
	checkAlive(t, replica, "after the apiserver came back")
}

// TestSyncLeaderPartitioned: the leader alone loses the apiserver (its
// connection cut by a proxy) for longer than the lease while the other
// replica still reaches it. The standby takes over and writes; when the
// old leader's connection comes back it neither exits nor writes again:
// the audit log shows the old leader's writes, then the new one's, never
// interleaved.
func TestSyncLeaderPartitioned(t *testing.T) {
	const (
		leaseDuration = 4 * time.Second
		partition     = 3 * leaseDuration
	)
	timings := []string{"--leader-elect-lease-duration", leaseDuration.String(),
		"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}
	cp := outageFixture(t)
	proxied, proxy := cp.ProxiedKubeconfig(t, cp.KubeconfigFor(t, "sync-0", "system:masters"))
	replicas := []*outageReplica{startReplica(t, "sync-0", proxied, timings...)}
	waitLeader(t, replicas)
	waitInShards(t, cp, syncBudget, "10.96.0.9\tworker-1")
	standby := startReplica(t, "sync-1", cp.KubeconfigFor(t, "sync-1", "system:masters"), timings...)
	replicas = append(replicas, standby)
	if l := leaderOf(t, replicas); l != replicas[0] {
		t.Fatal("sync-0 does not lead")
	}

	proxy.Cut()
	cut := time.Now()
	cp.CreateNode(t, harness.Node{Name: "during-partition", InternalIP: "192.168.0.32", Edge: true})
	written := waitInShards(t, cp, 3*leaseDuration, "10.96.0.9\tduring-partition")
	t.Logf("sync-0 cut off; the Node made then written by the standby %s later", written.Sub(cut).Round(time.Millisecond))
	time.Sleep(time.Until(cut.Add(partition)))
	checkAlive(t, replicas, "during the partition")
	proxy.Restore(t)
	restored := time.Now()
	cp.CreateNode(t, harness.Node{Name: "after-partition", InternalIP: "192.168.0.33", Edge: true})
	waitInShards(t, cp, backWithin, "10.96.0.9\tafter-partition")
	time.Sleep(2 * leaseDuration) // time for the old leader to misbehave
	checkAlive(t, replicas, "after the partition")
	if l := leaderOf(t, replicas); l != standby {
		t.Error("sync-1 does not lead after the partition")
	}
	if !strings.Contains(replicas[0].Output(), "Lost the Lease: writes stopped; campaigning again") {
		t.Errorf("sync-0 does not say it lost the Lease:\n%s", replicas[0].Output())
	}

	writes := recordWrites(t, cp)
	turns, count := writersInTurn(writes)
	t.Logf("%d writes of the records, by writer in turn %v: %v", len(writes), turns, count)
	if !slices.Equal(turns, []string{"sync-0", "sync-1"}) {
		t.Errorf("writers in turn %v, want sync-0 then sync-1", turns)
	}
	for _, w := range writes {
		if w.User.Username == "sync-0" && w.RequestReceivedTimestamp.After(cut) {
			t.Errorf("sync-0 wrote %s %s at %s, after it was cut off (%s; restored %s)", w.Verb, w.ObjectRef.Name,
				w.RequestReceivedTimestamp.Format(time.StampMilli), cut.Format(time.StampMilli), restored.Format(time.StampMilli))
		}
	}
}
