package realcluster

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// runSync runs tunnel-nodes-sync with the admin kubeconfig, as a user on a
// laptop would, and returns its output; the log shows when each line came,
// to set beside the DNS probe's failures.
func runSync(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return runSyncBin(t, syncBin, args...)
}

// runSyncBin is runSync with another version's tunnel-nodes-sync.
func runSyncBin(t testing.TB, bin string, args ...string) (string, error) {
	t.Helper()
	out, timed, err := syncCommand(t, bin, args...)
	// A benchmark keeps the first 10 lines of its log: there the output is
	// logged on failure only, so the figures it logs are not cut off.
	if _, bench := t.(*testing.B); !bench || err != nil {
		t.Logf("tunnel-nodes-sync %s:\n%s", strings.Join(args, " "), timed)
	}
	return out, err
}

// runSyncQuiet is runSync that logs nothing: for a check whose error message
// carries the output, so that a failed test's last lines say what failed.
func runSyncQuiet(t testing.TB, args ...string) (string, error) {
	t.Helper()
	out, _, err := syncCommand(t, syncBin, args...)
	return out, err
}

// syncCommand runs bin against the cluster: its output, the same with each
// line's time, and how it exited.
func syncCommand(t testing.TB, bin string, args ...string) (out, timed string, err error) {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--kubeconfig", kc.Kubeconfig)...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var o, tm strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		fmt.Fprintln(&o, sc.Text())
		fmt.Fprintf(&tm, "%s %s\n", time.Now().Format("15:04:05.000"), sc.Text())
	}
	err = cmd.Wait()
	return o.String(), tm.String(), err
}

// dnsProbe asks a DNS Service from every node every probeEvery, as the pods
// of a cluster do, over UDP and TCP in turn, and counts the answers that
// failed. Each query is asked once with a 1 s timeout, as the strictest
// client would: a query that a resolver's second attempt would have saved
// is a failure.
type dnsProbe struct {
	server, name string // server is "" when each asker has its own
	from         []string
	want         string // the one A record expected; any when empty

	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	total    int
	tcp      int      // of total, asked over TCP
	failures []string // when asked, from which node, over what, what came back
	// slowest are the answers that took longest, from the line written to
	// dig to its answer read, longest first: when and where a tail comes
	// from (a failed run's log has nothing else on it).
	slowest []slowAnswer
}

// slowAnswer is one query's time, and when, from where and over what it
// was asked.
type slowAnswer struct {
	took time.Duration
	what string
}

// keptSlowest is how many of the slowest answers a probe reports.
const keptSlowest = 3

const probeName = "kubernetes.default.svc.cluster.local"

// probeEvery is how often each place asks. A gap in the answers longer than
// it is seen from every place; at 100 ms the thirty places of a revert and
// the CoreDNS answering them took a quarter of the two cores (perf sched),
// and the saturated machine delayed every DNS server it timed.
const probeEvery = 200 * time.Millisecond

// startDNSProbe asks the kube-dns Service for the kubernetes Service.
func startDNSProbe(nodes []*cluster.Node) *dnsProbe {
	return startDNSProbeOf(cluster.KubeDNSIP(), probeName, "", nodes)
}

func startDNSProbeOf(server, name, want string, nodes []*cluster.Node) *dnsProbe {
	var askers []asker
	for _, n := range nodes {
		askers = append(askers, asker{where: n.Name, server: server, digCommand: func(args ...string) *exec.Cmd {
			return n.NetCommand(context.Background(), "dig", args...)
		}})
	}
	return startProbe(server, name, want, askers)
}

// asker is where a probe asks from: a node or a pod's network namespace,
// and the server it asks there. digCommand runs dig there.
type asker struct {
	where, server string
	digCommand    func(args ...string) *exec.Cmd
}

func startProbe(server, name, want string, askers []asker) *dnsProbe {
	p := &dnsProbe{server: server, name: name, want: want, stop: make(chan struct{})}
	// The probe returns once every dig is up, to cover what comes next
	// from its start.
	var ready sync.WaitGroup
	for _, n := range askers {
		p.from = append(p.from, n.where)
		p.wg.Add(1)
		ready.Add(1)
		go func() {
			defer p.wg.Done()
			// A dig for each protocol, asked in turns: one process each,
			// not one per query. dig gives up after 3 s less the time its
			// batch waited for the query (harness.DigBatch says why); an
			// answer after 1 s is a failure, as a 1 s timeout makes it.
			var batches [2]*harness.DigBatch
			var err error
			for i, options := range [][]string{{"+time=3", "+tries=1"}, {"+time=3", "+tries=1", "+tcp"}} {
				if batches[i], err = harness.StartDigBatch(n.digCommand, options...); err != nil {
					break
				}
				defer batches[i].Close()
			}
			ready.Done()
			if err != nil {
				p.mu.Lock()
				p.failures = append(p.failures, fmt.Sprintf("from %s: %v", n.where, err))
				p.mu.Unlock()
				return
			}
			tick := time.NewTicker(probeEvery)
			defer tick.Stop()
			for overTCP := false; ; overTCP = !overTCP {
				select {
				case <-p.stop:
					return
				case <-tick.C:
				}
				b, proto := batches[0], "udp"
				if overTCP {
					b, proto = batches[1], "tcp"
				}
				asked := time.Now()
				r, err := b.Ask(n.server, p.name, "A")
				took := time.Since(asked)
				failure := ""
				switch {
				case err != nil:
					failure = err.Error()
				case took > time.Second:
					failure = fmt.Sprintf("answered after %s, past the 1 s timeout", took.Round(time.Millisecond))
				case r.Status != "NOERROR" || len(r.Data("A")) == 0,
					p.want != "" && strings.Join(r.Data("A"), ",") != p.want:
					failure = r.Status + " " + strings.Join(r.Data("A"), ",")
				}
				p.mu.Lock()
				p.total++
				if overTCP {
					p.tcp++
				}
				query := func() string { return fmt.Sprintf("%s from %s over %s", asked.Format("15:04:05.000"), n.where, proto) }
				i, _ := slices.BinarySearchFunc(p.slowest, took, func(a slowAnswer, d time.Duration) int { return cmp.Compare(d, a.took) })
				if i < keptSlowest {
					p.slowest = slices.Insert(p.slowest, i, slowAnswer{took, query()})
					p.slowest = p.slowest[:min(len(p.slowest), keptSlowest)]
				}
				if failure != "" {
					p.failures = append(p.failures, fmt.Sprintf("asked %s: %s", query(), firstLine(failure)))
				}
				p.mu.Unlock()
			}
		}()
	}
	ready.Wait()
	return p
}

// asked is how many queries the probe has asked so far.
func (p *dnsProbe) asked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// finish stops the probe and fails the test for any failed answer.
func (p *dnsProbe) finish(t testing.TB, what string) {
	t.Helper()
	p.wait()
	p.report(t, what)
}

// wait stops the probe and waits for its last queries.
func (p *dnsProbe) wait() {
	close(p.stop)
	p.wg.Wait()
}

// report logs what the probe asked and fails t on a failed query.
func (p *dnsProbe) report(t testing.TB, what string) {
	t.Helper()
	server := p.server
	if server == "" {
		server = "each one's resolv.conf server"
	}
	var slowest []string
	for _, a := range p.slowest {
		slowest = append(slowest, fmt.Sprintf("%s (%s)", a.took.Round(time.Millisecond), a.what))
	}
	t.Logf("%s: %d DNS queries (%d over TCP) for %s through %s from %s (one try, 1 s timeout), %d failed, slowest %s",
		what, p.total, p.tcp, p.name, server, strings.Join(p.from, ", "), len(p.failures), strings.Join(slowest, ", "))
	if p.total == 0 {
		t.Errorf("%s: the DNS probe asked nothing", what)
	}
	if len(p.failures) > 0 {
		// One line each: a CI excerpt keeps only the file:line lines.
		t.Errorf("%s: %d of %d DNS queries failed; first ones:", what, len(p.failures), p.total)
		for _, f := range p.failures[:min(10, len(p.failures))] {
			t.Errorf("  %s", f)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// kubeadmState is what kubeadm made that install changes: the objects'
// contents and the static pod manifests, compared byte for byte after revert.
func kubeadmState(t testing.TB) map[string]string {
	t.Helper()
	ctx := context.Background()
	state := map[string]string{}
	add := func(key string, v any) {
		data, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		state[key] = string(data)
	}
	for _, name := range []string{"coredns", "kube-proxy", "kubelet-config"} {
		cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		add("configmap/"+name, map[string]any{"data": cm.Data, "labels": cm.Labels, "annotations": cm.Annotations})
	}
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add("service/kube-dns", map[string]any{"spec": svc.Spec, "labels": svc.Labels, "annotations": svc.Annotations})
	dep, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add("deployment/coredns", map[string]any{"spec": dep.Spec, "labels": dep.Labels})
	// OpenYurt's own: install switches the tunnel server's DNS controller off.
	tunnel, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "yurt-tunnel-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add("deployment/yurt-tunnel-server", map[string]any{"spec": tunnel.Spec.Template.Spec.Containers, "labels": tunnel.Labels})
	ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add("daemonset/kube-proxy", map[string]any{"spec": ds.Spec, "labels": ds.Labels})
	// Each kubelet's configuration, byte for byte (node-local DNS edits it).
	for _, n := range kc.Nodes {
		data, err := os.ReadFile(filepath.Join(n.StateDir("var/lib/kubelet"), "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		state["kubelet/"+n.Name] = fmt.Sprintf("sha256 %x, %d bytes", sha256.Sum256(data), len(data))
	}
	for _, n := range kc.ControlPlanes() {
		manifests, _ := filepath.Glob(filepath.Join(n.StateDir("etc/kubernetes"), "manifests", "*"))
		for _, m := range manifests {
			data, err := os.ReadFile(m)
			if err != nil {
				t.Fatal(err)
			}
			state["manifest/"+n.Name+"/"+filepath.Base(m)] = fmt.Sprintf("sha256 %x, %d bytes", sha256.Sum256(data), len(data))
		}
	}
	return state
}

// revertExactly runs revert with the DNS probe on, and checks that kubeadm's
// objects and manifests are what kubeadmState read before install; it
// returns revert's output.
func revertExactly(t testing.TB, before map[string]string) string {
	t.Helper()
	probe := startDNSProbe(kc.Nodes)
	out, err := runSync(t, "revert")
	probe.finish(t, "revert")
	if err != nil {
		t.Fatalf("revert: %v", err)
	}
	if diffs := diffState(before, kubeadmState(t)); len(diffs) > 0 {
		t.Errorf("after revert, kubeadm's objects and manifests differ from before install:\n%s", strings.Join(diffs, "\n"))
	}
	return out
}

func diffState(before, after map[string]string) []string {
	var keys []string
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var diffs []string
	for _, k := range keys {
		if before[k] != after[k] {
			diffs = append(diffs, fmt.Sprintf("%s:\n--- before\n%s\n+++ after\n%s", k, before[k], after[k]))
		}
	}
	return diffs
}

// recreateTunnelService deletes the tunnel Service and makes it again as the
// cluster made it: it gets a new ClusterIP.
func recreateTunnelService(t testing.TB) *corev1.Service {
	t.Helper()
	ctx := context.Background()
	if err := cs.CoreV1().Services("kube-system").Delete(ctx, tunnelnodes.ServiceName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services("kube-system").Create(ctx, cluster.TunnelService(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
