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
	// PodBack and CacheAnswers are from the reboot: the pod's container
	// runs again; its DNS answers it.
	PodBack, CacheAnswers time.Duration
	// Probed is the queries asked from then until the link came back, and
	// Failed how many of them failed.
	Probed, Failed int
	// After the link came back: yurthub proxies again; the node-local
	// cache's ServiceAccount token is a real one again (yurthub hands a pod
	// started while cut off a fake one); a change made during the cut is
	// answered.
	Healthy, RealToken, Answered time.Duration
}

// rebootWhileCutOff cuts worker-1 off from master-1, reboots it, and asks
// pod's DNS for every name of want from when the pod and its DNS are back
// until cutFor has passed since the cut, one try each with a 1 s timeout.
// A Node created during the cut must be answered once the link is back.
// resolver is where the pod asks ("" for its resolv.conf server); wantOK
// says whether the probe must not fail (the stock layout is measured);
// beforeLinkBack, when set, runs at the end of the cut.
func rebootWhileCutOff(t testing.TB, pod, resolver string, want map[string]string, cutFor time.Duration, wantOK bool, beforeLinkBack func()) rebootFigures {
	ctx := context.Background()
	worker := kc.Node("worker-1")
	var fig rebootFigures
	restore := cutOff(t, worker, kc.Master())
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
		restartTunnelAgent(t)
		cs.CoreV1().Nodes().Delete(ctx, "edge-during-cut", metav1.DeleteOptions{})
	}()
	cut := time.Now()
	rebootedCutOff[worker.Name] = true
	if err := worker.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	rebooted := time.Now()
	if err := cluster.CreateNodeObject(ctx, cs, "edge-during-cut", "198.51.100.201", map[string]string{tunnelnodes.EdgeNodeLabel: "true"}); err != nil {
		t.Fatal(err)
	}

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
	t.Logf("worker-1 rebooted while cut off: pod %s running again %s after the reboot, its DNS (%s) answering after %s",
		pod, fig.PodBack.Round(100*time.Millisecond), p.resolver, fig.CacheAnswers.Round(100*time.Millisecond))

	var probes []*dnsProbe
	rebootedPod := p.asker()
	rebootedPod.where += " (rebooted)"
	for name, addr := range want {
		probes = append(probes, startProbe(p.resolver, name, addr, []asker{rebootedPod}))
	}
	time.Sleep(time.Until(cut.Add(cutFor)))
	for _, pr := range probes {
		pr.mu.Lock()
		fig.Probed += pr.total
		fig.Failed += len(pr.failures)
		pr.mu.Unlock()
		if wantOK {
			pr.finish(t, fmt.Sprintf("worker-1 rebooted, cut off for %s", cutFor))
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
	if nodeLocal != "" && !fakeToken(worker, nodeLocal) {
		t.Errorf("pod %s, started while cut off, reads a token yurthub did not make up", nodeLocal)
	}
	restore()
	linked = true
	back := time.Now()
	harness.Eventually(t, 4*time.Minute, func() error {
		if fig.Healthy == 0 && yurthubHealthy(worker) {
			fig.Healthy = time.Since(back)
		}
		if fig.RealToken == 0 && nodeLocal != "" && !fakeToken(worker, nodeLocal) {
			fig.RealToken = time.Since(back)
		}
		r, err := p.dig(ctx, p.resolver, "edge-during-cut", "A", "+time=1", "+tries=1")
		if err != nil || len(r.Data("A")) == 0 {
			return fmt.Errorf("edge-during-cut at %s from pod %s: %s %v", p.resolver, pod, r.Status, err)
		}
		fig.Answered = time.Since(back)
		return nil
	})
	t.Logf("link back: yurthub proxying after %s, node-local cache's token a real one after %s, edge-during-cut (made during the cut) answered after %s",
		fig.Healthy.Round(100*time.Millisecond), fig.RealToken.Round(100*time.Millisecond), fig.Answered.Round(100*time.Millisecond))
	// yurthub proxies again after two good heartbeats 10 s apart (0-20 s),
	// the kubelet gives the rebooted pods real tokens at its next sync;
	// then ours: the records' watch lists again within 5 s, but for a lag
	// of up to a minute more not understood yet (unexplainedLag).
	if limit := max(yurthubBackWithin, fig.RealToken) + unexplainedLag + 5*time.Second; wantOK && fig.Answered > limit {
		t.Errorf("a change made during the cut answered %s after the link back (yurthub proxying after %s, token real after %s), want within %s",
			fig.Answered.Round(100*time.Millisecond), fig.Healthy.Round(100*time.Millisecond), fig.RealToken.Round(100*time.Millisecond), limit.Round(100*time.Millisecond))
	}
	return fig
}

// unexplainedLag: twice on 2026-11-27 the change answered a minute late:
// 64.1 s after the link with yurthub proxying after 10.5 s and the cache's
// token file real at once (fresh-clone run at 700178c), and 68 s on the
// dual-stack cluster with yurthub back after 10.6 s; other runs answered
// within 7 s of the later of the two. The cause is not found (client-go's
// once-a-minute token read is the suspect, though yurthosts reads the token
// again on a 401); until it is, a change may take a minute more.
const unexplainedLag = time.Minute

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
// refuses; true also while it cannot be read.
func fakeToken(n *cluster.Node, pod string) bool {
	pid, err := n.PodPID(context.Background(), "kube-system", pod)
	if err != nil {
		return true
	}
	jwt, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/var/run/secrets/kubernetes.io/serviceaccount/token", pid))
	if err != nil {
		return true
	}
	parts := strings.Split(string(jwt), ".")
	if len(parts) != 3 {
		return true
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct{ Iss string }
	if err != nil || json.Unmarshal(payload, &claims) != nil {
		return true
	}
	return claims.Iss == "openyurt"
}
