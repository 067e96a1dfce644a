package realcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/cluster"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The HA control plane: master-1, master-2 and master-3 behind haproxy, and
// the two edge sites whose nodes share one address (test/cluster).

// apiProbe is what a client of the control-plane endpoint meets: a GET of
// a namespace (a quorum read through etcd) every 200 ms, each on a new
// connection through the load balancer, with a 1 s timeout and one try.
// It also reads the load balancer's view every 200 ms: which apiservers it
// has taken out, and for how long.
type apiProbe struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	asked     int
	failures  []string
	refused   int                        // failures other than the 1 s timeout: connection refused, reset, EOF, an HTTP error
	latencies []time.Duration            // of the answered ones
	out       map[string][]time.Duration // per control-plane node, each spell out of the load balancer
	outSince  map[string]time.Time
	maxOut    int // the most apiservers out at once
}

func startAPIProbe(t testing.TB) *apiProbe {
	t.Helper()
	cfg, err := kc.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}}
	target := cfg.Host + "/api/v1/namespaces/kube-system"
	p := &apiProbe{stop: make(chan struct{}), out: map[string][]time.Duration{}, outSince: map[string]time.Time{}}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			at := time.Now()
			resp, err := client.Get(target)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("HTTP %d", resp.StatusCode)
				}
			}
			took := time.Since(at)
			p.mu.Lock()
			p.asked++
			if err != nil {
				p.failures = append(p.failures, fmt.Sprintf("%s: %v", at.Format("15:04:05.000"), err))
				if uerr, ok := errors.AsType[*url.Error](err); !ok || !uerr.Timeout() {
					p.refused++
				}
			} else {
				p.latencies = append(p.latencies, took)
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		defer p.wg.Done()
		for {
			select {
			case <-p.stop:
				p.sample(time.Now(), nil)
				return
			case <-time.After(200 * time.Millisecond):
			}
			status, err := kc.LoadBalancerStatus()
			if err == nil {
				p.sample(time.Now(), status)
			}
		}
	}()
	return p
}

// sample records which apiservers the load balancer has out (a nil status
// ends every spell).
func (p *apiProbe) sample(at time.Time, status map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := 0
	for _, n := range kc.ControlPlanes() {
		up := status == nil || strings.HasPrefix(status[n.Name], "UP")
		since, wasOut := p.outSince[n.Name]
		switch {
		case !up && !wasOut:
			p.outSince[n.Name] = at
		case up && wasOut:
			p.out[n.Name] = append(p.out[n.Name], at.Sub(since))
			delete(p.outSince, n.Name)
		}
		if !up {
			out++
		}
	}
	p.maxOut = max(p.maxOut, out)
}

// finish stops the probe, logs what it saw, and fails the test for a
// request refused or cut (what an apiserver taken down under its clients
// gives), or for more than 2% answered late: on two shared cores at a load
// of 8–9, an apiserver starting up starves the others for a few seconds
// and a quorum read then takes more than 1 s.
func (p *apiProbe) finish(t testing.TB, what string) apiFigures {
	t.Helper()
	fig := p.report(t, what)
	if p.refused > 0 || float64(fig.failed) > 0.02*float64(fig.asked) {
		t.Errorf("API requests failed through the load balancer during %s (%d refused or cut, %d of %d in all): %s", what, p.refused, fig.failed, fig.asked,
			strings.Join(firstN(p.failures, 10), "; "))
	}
	return fig
}

// report stops the probe and logs what it saw.
func (p *apiProbe) report(t testing.TB, what string) apiFigures {
	t.Helper()
	close(p.stop)
	p.wg.Wait()
	var spells []string
	for _, n := range kc.ControlPlanes() {
		var d []string
		for _, s := range p.out[n.Name] {
			d = append(d, s.Round(100*time.Millisecond).String())
		}
		if len(d) > 0 {
			spells = append(spells, n.Name+" "+strings.Join(d, ", "))
		}
	}
	if len(spells) == 0 {
		spells = []string{"none"}
	}
	slices.Sort(p.latencies)
	quantile := func(q float64) time.Duration {
		if len(p.latencies) == 0 {
			return 0
		}
		return p.latencies[int(q*float64(len(p.latencies)-1))].Round(time.Millisecond)
	}
	t.Logf("API through the load balancer during %s: %d single-try GETs, %d failed (%d refused or cut, the rest past 1 s; answered: median %s, p99 %s, slowest %s); apiservers out of the load balancer: %s (at most %d at once)",
		what, p.asked, len(p.failures), p.refused, quantile(0.5), quantile(0.99), quantile(1), strings.Join(spells, "; "), p.maxOut)
	if len(p.failures) > 0 {
		t.Logf("the failed ones: %s", strings.Join(firstN(p.failures, 20), "; "))
	}
	return apiFigures{asked: p.asked, failed: len(p.failures), maxOut: p.maxOut}
}

type apiFigures struct{ asked, failed, maxOut int }

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// checkOneControlPlaneNodeAtATime: the control-plane step took one
// apiserver at a time out of the load balancer, never two.
func checkOneControlPlaneNodeAtATime(t testing.TB, fig apiFigures, what string) {
	t.Helper()
	if fig.maxOut > 1 {
		t.Errorf("%s took %d apiservers out of the load balancer at once, want one at a time", what, fig.maxOut)
	}
}

// siteEchoPods starts, on each site's node, a pod that prints the node it
// runs on: the two nodes share one address, so an answer from the wrong one
// shows.
func siteEchoPods(t testing.TB) map[string]string {
	t.Helper()
	ctx := context.Background()
	pods := map[string]string{}
	for _, n := range kc.SiteNodes() {
		pod := cluster.ProbePod("site-echo-"+n.Name, n.Name, false, nil, "node", "--stay")
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
		if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cs.CoreV1().Pods("kube-system").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		})
		pods[n.Name] = pod.Name
	}
	for _, name := range pods {
		if _, err := kc.WaitPod(ctx, name, 3*time.Minute, cluster.PodReady); err != nil {
			t.Fatal(err)
		}
	}
	return pods
}

// checkEveryAPIServerReachesTheSites: kubectl logs and exec of the pod on
// each site's node, through each apiserver addressed directly, answer from
// that node; from the apiservers without yurt-tunnel-server, conntrack
// shows the path: the tunnel Service's ClusterIP, DNATed by kube-proxy to
// yurt-tunnel-server's pod on master-1.
func checkEveryAPIServerReachesTheSites(t *testing.T) {
	ctx := context.Background()
	pods := siteEchoPods(t)
	svc, err := cs.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	server, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=yurt-tunnel-server"})
	if err != nil || len(server.Items) != 1 {
		t.Fatalf("yurt-tunnel-server pods: %v (%d)", err, len(server.Items))
	}
	serverPod := server.Items[0]
	t.Logf("yurt-tunnel-server: pod %s on %s at %s; the tunnel Service %s", serverPod.Name, serverPod.Spec.NodeName, serverPod.Status.PodIP, svc.Spec.ClusterIP)
	for _, m := range kc.ControlPlanes() {
		direct := "https://" + m.IP + ":6443"
		for _, n := range kc.SiteNodes() {
			want := "running on node " + n.Name
			started := time.Now()
			logs, err := throughTunnel(t, "--server", direct, "-n", "kube-system", "logs", pods[n.Name])
			if err != nil || strings.TrimSpace(logs) != want {
				t.Errorf("kubectl logs %s through %s's apiserver: %v %q, want %q", pods[n.Name], m.Name, err, logs, want)
			}
			out, err := throughTunnel(t, "--server", direct, "-n", "kube-system", "exec", pods[n.Name], "--", "/probe", "node")
			if err != nil || strings.TrimSpace(out) != want {
				t.Errorf("kubectl exec %s through %s's apiserver: %v %q, want %q", pods[n.Name], m.Name, err, out, want)
			}
			t.Logf("through %s's apiserver (%s): logs and exec of %s on %s (%s) answered %q in %s", m.Name, direct, pods[n.Name], n.Name, n.IP,
				strings.TrimSpace(out), time.Since(started).Round(10*time.Millisecond))
		}
		if m.Name == serverPod.Spec.NodeName {
			continue
		}
		// The apiserver's connections to the edge kubelets left conntrack
		// entries in its node: to a ClusterIP of the tunnel Service (the
		// IPv6 one first: RFC 6724's order), answered by the server pod.
		var line string
		var tables []string
		for _, clusterIP := range svc.Spec.ClusterIPs {
			v6 := strings.Contains(clusterIP, ":")
			family, own := "ipv4", m.IP
			if v6 {
				family, own = "ipv6", m.IP6
			}
			var server string
			for _, ip := range serverPod.Status.PodIPs {
				if strings.Contains(ip.IP, ":") == v6 {
					server = ip.IP
				}
			}
			entries, err := m.NetCommand(ctx, "conntrack", "-L", "-f", family, "-p", "tcp", "--orig-dst", clusterIP, "--dport", "10250").CombinedOutput()
			tables = append(tables, fmt.Sprintf("%s (%v):\n%s", clusterIP, err, entries))
			path := regexp.MustCompile(`src=` + regexp.QuoteMeta(own) + ` dst=` + regexp.QuoteMeta(clusterIP) + ` sport=\d+ dport=10250 .*src=` +
				regexp.QuoteMeta(server) + ` dst=` + regexp.QuoteMeta(own) + ` sport=10263`)
			if line = firstMatch(string(entries), path); line != "" {
				break
			}
		}
		if line == "" {
			t.Errorf("%s: no conntrack entry from its apiserver to the tunnel Service's ClusterIPs %v port 10250 DNATed to yurt-tunnel-server's pod at 10263:\n%s",
				m.Name, svc.Spec.ClusterIPs, strings.Join(tables, "\n"))
			continue
		}
		t.Logf("%s's path to the edge kubelets, from its conntrack table: %s", m.Name, strings.Join(strings.Fields(line), " "))
	}
	for _, n := range kc.SiteNodes() {
		// And the answer was not the node address's: nothing in the cloud
		// can dial it.
		if out, err := kc.Master().Run(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+n.IP+"/10250"); err == nil {
			t.Errorf("master-1 dialled %s's address %s:10250 directly: %s", n.Name, n.IP, out)
		}
	}
}

func firstMatch(text string, re *regexp.Regexp) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if re.MatchString(sc.Text()) {
			return sc.Text()
		}
	}
	return ""
}

// checkControlPlaneAsBuilt: three control-plane nodes, each serving
// through the load balancer, three etcd members, and the sites' nodes with
// one shared address.
func checkControlPlaneAsBuilt(t *testing.T) {
	ctx := context.Background()
	status, err := kc.LoadBalancerStatus()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range kc.ControlPlanes() {
		names = append(names, m.Name)
		if !strings.HasPrefix(status[m.Name], "UP") {
			t.Errorf("the load balancer has %s %s, want UP", m.Name, status[m.Name])
		}
		for _, c := range []string{"etcd", "kube-apiserver"} {
			p, err := cs.CoreV1().Pods("kube-system").Get(ctx, c+"-"+m.Name, metav1.GetOptions{})
			if err != nil || !cluster.PodReady(p) {
				t.Errorf("%s-%s not Ready: %v", c, m.Name, err)
			}
		}
	}
	if len(names) != 3 {
		t.Errorf("control-plane nodes: %v, want three", names)
	}
	harness.Eventually(t, time.Minute, func() error {
		members, err := kc.EtcdMembers(ctx)
		if err == nil && len(members) != 3 {
			err = fmt.Errorf("etcd members %v, want three", members)
		}
		return err
	})
	sites := kc.SiteNodes()
	if len(sites) != 2 || sites[0].IP != sites[1].IP || sites[0].Site() == sites[1].Site() {
		t.Fatalf("the edge sites' nodes: %v, want two in two sites with one address", sites)
	}
	for _, n := range sites {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ip := internalIP(node); ip != n.IP {
			t.Errorf("%s's InternalIP %s, want %s", n.Name, ip, n.IP)
		}
	}
	t.Logf("control plane: %s behind the load balancer at %s; edge sites: %s and %s at %s each", strings.Join(names, ", "), cluster.LoadBalancerURL(),
		sites[0].Name, sites[1].Name, sites[0].IP)
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && !strings.Contains(a.Address, ":") {
			return a.Address
		}
	}
	return ""
}
