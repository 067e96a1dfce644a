package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	outageRecords = 10000
	outageLoadQPS = 2000
)

// loadRecords returns n records, nine in ten at the tunnel IP and the rest
// cloud nodes at their own address, as ConfigMap lines and name → address.
func loadRecords(n int, tunnelIP string) (lines []string, want map[string]string) {
	want = make(map[string]string, n)
	for i := range n {
		name, ip := fmt.Sprintf("edge-node-%05d", i), tunnelIP
		if i%10 == 0 {
			name, ip = fmt.Sprintf("cloud-node-%05d", i), fmt.Sprintf("192.168.%d.%d", i/250, i%250+1)
		}
		lines = append(lines, ip+"\t"+name)
		want[name] = ip
	}
	return lines, want
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// underLoad runs dnsperf and an answer checker against dns for d while
// fault runs, then fails the test on any lost, failed or wrong answer.
func underLoad(t *testing.T, dns *harness.CoreDNS, want map[string]string, d time.Duration, fault func()) {
	t.Helper()
	perf := harness.StartDNSPerf(t, dns.DNSAddr, harness.WriteQueries(t, keys(want), "A"), outageLoadQPS, d)
	checker := harness.StartAnswerChecker(dns.DNSAddr, want)
	fault()
	res := perf.Wait(t)
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
	lines, want := loadRecords(outageRecords, "10.96.0.9")
	cp.ApplyConfigMap(t, recordsConfigMap(lines...))
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, onlyYurthosts)
	expectAnswer(t, dns.DNSAddr, "cloud-node-00010", "A", "192.168.0.11")

	const outage = 30 * time.Second
	underLoad(t, dns, want, outage+10*time.Second, func() {
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
		expectWithin(t, dns.DNSAddr, "after-restart", "A", "10.96.0.9")
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
	lines, want := loadRecords(1000, "10.96.0.9")
	cp.ApplyConfigMap(t, recordsConfigMap(lines...))
	kubeconfig, proxy := cp.ProxiedKubeconfig(t, cp.Kubeconfig)
	dns := harness.StartCoreDNS(t, kubeconfig, onlyYurthosts)
	expectAnswer(t, dns.DNSAddr, "edge-node-00001", "A", "10.96.0.9")

	underLoad(t, dns, want, 8*time.Second, func() {
		cp.KillAPIServer(t)
		proxy.Cut()
		cp.StartAPIServer(t)
		cp.DeleteService(t, "kube-system", "x-tunnel-server-internal-svc")
		cp.CreateService(t, harness.TunnelService("10.96.0.77"))
		time.Sleep(2 * time.Second) // answers from the old Service, checked by underLoad
	})

	proxy.Restore(t)
	start := time.Now()
	harness.Eventually(t, 30*time.Second, func() error {
		for _, name := range []string{"edge-node-00001", "edge-node-00999"} {
			r, err := harness.DigErr(dns.DNSAddr, name, "A")
			if err != nil {
				return err
			}
			if err := matchAnswer(r, "A", []string{"10.96.0.77"}); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	})
	t.Logf("answers moved to the new ClusterIP %s after the connection came back", time.Since(start).Round(time.Millisecond))
	expectAnswer(t, dns.DNSAddr, "cloud-node-00010", "A", "192.168.0.11")
	if strings.Contains(dns.Output(), "panic") {
		t.Errorf("coredns-yurt panicked:\n%s", dns.Output())
	}
}
