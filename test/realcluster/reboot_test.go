package realcluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rebootNames are what pods on worker-1 must keep resolving through a
// reboot while cut off: the node names (yurthosts) and ClusterIP Services
// that existed before the cut, with the answers kube-dns gave then.
func rebootNames(t testing.TB) map[string]string {
	t.Helper()
	ctx := context.Background()
	want := map[string]string{}
	for _, name := range []string{"master-1", "worker-1", probeName,
		"kube-dns.kube-system.svc.cluster.local", cluster.TunnelService().Name + ".kube-system.svc.cluster.local"} {
		r, err := kc.Master().Dig(ctx, cluster.KubeDNSIP(), name, "A")
		if err != nil || len(r.Data("A")) != 1 {
			t.Fatalf("kube-dns on %s: %v %v", name, r.Data("A"), err)
		}
		want[name] = r.Data("A")[0]
	}
	return want
}

// rebootedCutOff are the nodes rebootWhileCutOff rebooted in this
// cluster's life: pods there have restarted for it.
var rebootedCutOff = map[string]bool{}

// rebootFigures is what a reboot while cut off showed, for the log and
// make bench.
type rebootFigures struct {
	// PodBack and CacheAnswers are from the last reboot: the pod's
	// container runs again; its DNS answers it.
	PodBack, CacheAnswers time.Duration
	// Probed is the queries asked from then until the link came back, and
	// Failed how many of them failed.
	Probed, Failed int
	// After the link came back: yurthub proxies again (when HealthySeen: 0
	// for a yurthub that never stopped, a cut shorter than its heartbeats
	// notice); a change made during the cut is answered.
	Healthy, Answered time.Duration
	HealthySeen       bool
	// RealToken is when the node-local cache's ServiceAccount token was a
	// real one again (yurthub hands a pod started while cut off a made-up
	// one), when TokenSeen.
	RealToken time.Duration
	TokenSeen bool
}

// token is the figure as the log prints it.
func (f rebootFigures) token() string {
	if !f.TokenSeen {
		return "never seen real"
	}
	return f.RealToken.Round(100 * time.Millisecond).String()
}

// lastBack names which came last after the link: the link itself,
// yurthub proxying, or the cache's real token.
func (f rebootFigures) lastBack() string {
	last, at := "the link", time.Duration(0)
	if f.HealthySeen && f.Healthy > at {
		last, at = "yurthub healthy", f.Healthy
	}
	if f.TokenSeen && f.RealToken > at {
		last = "the cache's real token"
	}
	return last
}

// rebootWhileCutOff cuts worker-1 off from master-1 for cutFor, rebooting
// it reboots times during the cut (0: a cut alone), and probes the
// pod's DNS for every name of want from when the pod and its DNS are back
// until cutFor has passed since the cut, one try each with a 1 s timeout.
// A Node created during the cut must be answered within answerAfterYurthub
// of yurthub proxying again once the link is back. resolver is where the
// pod asks ("" for its resolv.conf server); wantOK says whether the probe
// must not fail (the stock layout is measured); beforeLinkBack, when set,
// runs at the end of the cut.
func rebootWhileCutOff(t testing.TB, pod, resolver string, want map[string]string, cutFor time.Duration, reboots int, wantOK bool, beforeLinkBack func()) rebootFigures {
	ctx := context.Background()
	worker := kc.Node("worker-1")
	var fig rebootFigures
	restore := cutOff(t, worker)
	linked := false
	defer func() {
		if !linked {
			restore()
		}
		waitNodeReady(t, "worker-1", true, 3*time.Minute)
		// kube-proxy, started while cut off, has its rules again only once
		// it lists after its crash-loop back-off: the next test's probes
		// must not meet that.
		harness.Eventually(t, 3*time.Minute, func() error {
			for i := range 20 {
				args := []string{"+time=1", "+tries=1"}
				if i%2 == 1 {
					args = append(args, "+tcp")
				}
				if r, err := worker.Dig(ctx, cluster.KubeDNSIP(), probeName, "A", args...); err != nil || len(r.Data("A")) == 0 {
					return fmt.Errorf("worker-1: %s through kube-dns: %s %v", probeName, r.Status, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		})
		if reboots > 0 {
			restartTunnelAgent(t)
		}
		cs.CoreV1().Nodes().Delete(ctx, "edge-during-cut", metav1.DeleteOptions{})
	}()
	cut := time.Now()

	// Back: the pod runs, in a new sandbox (the same process 2 s apart: the
	// kubelet may remake a sandbox it has just made); with wantOK, its DNS
	// answers.
	var p podNetns
	findPod := func() error {
		pid, err := worker.PodPID(ctx, "kube-system", pod)
		if err != nil {
			return err
		}
		p = podNetns{name: pod, node: "worker-1", pid: pid, resolver: resolver}
		if p.resolver == "" {
			var servers []string
			if servers, err = resolvConfServers(pid); err == nil {
				p.resolver = servers[0]
			}
		}
		return err
	}
	rebooted := cut
	for i := range reboots {
		rebootedCutOff[worker.Name] = true
		if err := worker.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		rebooted = time.Now()
		if i == 0 {
			createEdgeDuringCut(t)
		}
		harness.Eventually(t, 4*time.Minute, func() error {
			if err := findPod(); err != nil {
				return err
			}
			first := p.pid
			time.Sleep(2 * time.Second)
			if err := findPod(); err != nil || p.pid != first {
				return fmt.Errorf("pod %s: process %d, then %d (%v)", pod, first, p.pid, err)
			}
			fig.PodBack = time.Since(rebooted) - 2*time.Second
			return nil
		})
	}
	if reboots == 0 {
		createEdgeDuringCut(t)
		if err := findPod(); err != nil {
			t.Fatal(err)
		}
	}
	if wantOK {
		harness.Eventually(t, time.Minute, func() error {
			if err := findPod(); err != nil {
				return err
			}
			r, err := p.dig(ctx, p.resolver, "master-1", "A", "+time=1", "+tries=1")
			if err != nil || r.Status != "NOERROR" {
				return fmt.Errorf("pod %s: master-1 at %s: %s %v", pod, p.resolver, r.Status, err)
			}
			return nil
		})
		fig.CacheAnswers = time.Since(rebooted)
	}
	t.Logf("worker-1 cut off, rebooted %d times: pod %s running again %s after the last reboot, its DNS (%s) answering after %s",
		reboots, pod, fig.PodBack.Round(100*time.Millisecond), p.resolver, fig.CacheAnswers.Round(100*time.Millisecond))

	var probes []*dnsProbe
	from := p.asker()
	if reboots > 0 {
		from.where += " (rebooted)"
	}
	for name, addr := range want {
		probes = append(probes, startProbe(p.resolver, name, addr, []asker{from}))
	}
	time.Sleep(time.Until(cut.Add(cutFor)))
	for _, pr := range probes {
		pr.mu.Lock()
		fig.Probed += pr.total
		fig.Failed += len(pr.failures)
		pr.mu.Unlock()
		if wantOK {
			pr.finish(t, fmt.Sprintf("worker-1 rebooted %d times, cut off for %s", reboots, cutFor))
		} else {
			close(pr.stop)
			pr.wg.Wait()
		}
	}

	if beforeLinkBack != nil {
		beforeLinkBack()
	}
	// The link back: yurthub, the kubelet's token refresh, then ours.
	nodeLocal := nodeLocalPod(t)
	if nodeLocal != "" && reboots > 0 {
		if fake, err := fakeToken(worker, nodeLocal); err != nil || !fake {
			t.Errorf("pod %s, started while cut off, reads a token yurthub did not make up (%v)", nodeLocal, err)
		}
	}
	restore()
	linked = true
	back := time.Now()
	harness.Eventually(t, 4*time.Minute, func() error {
		if !fig.HealthySeen && yurthubHealthy(worker) {
			fig.Healthy, fig.HealthySeen = time.Since(back), true
		}
		if !fig.TokenSeen && nodeLocal != "" {
			if fake, err := fakeToken(worker, nodeLocal); err == nil && !fake {
				fig.RealToken, fig.TokenSeen = time.Since(back), true
			}
		}
		r, err := p.dig(ctx, p.resolver, "edge-during-cut", "A", "+time=1", "+tries=1")
		if err != nil || len(r.Data("A")) == 0 {
			return fmt.Errorf("edge-during-cut at %s from pod %s: %s %v", p.resolver, pod, r.Status, err)
		}
		fig.Answered = time.Since(back)
		return nil
	})
	needed := "it needed none"
	if fig.TokenSeen && fig.RealToken <= fig.Answered {
		needed = "it was real before the answer"
	}
	t.Logf("link back: yurthub proxying after %s, node-local cache's token real after %s (%s), edge-during-cut (made during the cut) answered after %s; last back: %s",
		fig.Healthy.Round(100*time.Millisecond), fig.token(), needed, fig.Answered.Round(100*time.Millisecond), fig.lastBack())
	if !wantOK {
		return fig
	}
	if !fig.HealthySeen {
		// Sooner than yurthub's own health check: the cache's watch through
		// yurthub and the load balancer outlived a short cut (its packets
		// dropped, no connection reset) and delivered the change as the
		// link came back.
		t.Logf("a change made during the cut answered %s after the link back, before yurthub's health check said it proxies again",
			fig.Answered.Round(100*time.Millisecond))
	} else if limit := fig.Healthy + answerAfterYurthub; fig.Answered > limit {
		t.Errorf("a change made during the cut answered %s after the link back, yurthub proxying after %s (token real after %s): want within %s of yurthub",
			fig.Answered.Round(100*time.Millisecond), fig.Healthy.Round(100*time.Millisecond), fig.token(), answerAfterYurthub)
	}
	return fig
}

// answerAfterYurthub bounds a change made during a cut from yurthub
// proxying again to the answer: the node-local cache reads the records
// through yurthub with the node's own credentials, so no token of its own
// has to become real first.
const answerAfterYurthub = 5 * time.Second

// createEdgeDuringCut makes the edge Node the link's return must answer.
func createEdgeDuringCut(t testing.TB) {
	if err := cluster.CreateNodeObject(context.Background(), cs, "edge-during-cut", "198.51.100.201", map[string]string{tunnelnodes.EdgeNodeLabel: "true"}); err != nil {
		t.Fatal(err)
	}
}

// yurthubBackWithin is when yurthub proxies again at the latest after a
// link comes back: two good heartbeats (--heartbeat-healthy-threshold) 10 s
// apart (--heartbeat-interval-seconds), its defaults.
const yurthubBackWithin = 20 * time.Second

// resolvConfServers are the nameservers of the process's resolv.conf, in order.
func resolvConfServers(pid int) ([]string, error) {
	resolv, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/resolv.conf", pid))
	if err != nil {
		return nil, err
	}
	var servers []string
	for _, line := range strings.Split(string(resolv), "\n") {
		if v, ok := strings.CutPrefix(line, "nameserver "); ok {
			servers = append(servers, strings.TrimSpace(v))
		}
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("no nameserver in the resolv.conf of PID %d", pid)
	}
	return servers, nil
}

// yurthubHealthy: yurthub on the node proxies to the apiserver again (its
// gauge, 1 when healthy).
func yurthubHealthy(n *cluster.Node) bool {
	out, err := n.YurthubGet(context.Background(), "/metrics")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "node_yurthub_server_healthy_status{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return err == nil && v == 1
		}
	}
	return false
}

// nodeLocalPod is the node-local cache's pod on worker-1 ("" when there
// is none: the stock layout).
func nodeLocalPod(t testing.TB) string {
	pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=node-local-dns", FieldSelector: "spec.nodeName=worker-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		return ""
	}
	return pods.Items[0].Name
}

// fakeToken: the ServiceAccount token the pod's container reads is one
// yurthub made up while cut off (issuer "openyurt"), which the apiserver
// refuses; an error when the token cannot be read.
func fakeToken(n *cluster.Node, pod string) (bool, error) {
	pid, err := n.PodPID(context.Background(), "kube-system", pod)
	if err != nil {
		return false, err
	}
	jwt, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/var/run/secrets/kubernetes.io/serviceaccount/token", pid))
	if err != nil {
		return false, err
	}
	parts := strings.Split(string(jwt), ".")
	if len(parts) != 3 {
		return false, fmt.Errorf("pod %s's token is no JWT", pod)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct{ Iss string }
	if err != nil || json.Unmarshal(payload, &claims) != nil {
		return false, fmt.Errorf("pod %s's token: claims unreadable (%v)", pod, err)
	}
	return claims.Iss == "openyurt", nil
}
