package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"
)

// TestStatusVerifyDNS: status --verify-dns resolves every node name at a
// running coredns-yurt (fed by a running sync), A and AAAA, and compares
// each answer with what it should be on a dual-stack cluster; a wrong
// record, a missing family and a missing name are reported and fail the
// command.
func TestStatusVerifyDNS(t *testing.T) {
	cp := harness.Start(t, harness.Options{DualStack: true})
	cp.CreateService(t, harness.TunnelService("10.96.0.9", "fd00:10:96::9"))
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "192.168.0.10", ExternalIP: "fd00::10"})
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	cp.CreateNode(t, harness.Node{Name: "worker-2", InternalIP: "192.168.0.22", Edge: true})
	sync := harness.StartSync(t, cp.Kubeconfig, "--leader-elect=false")
	dns := harness.StartCoreDNS(t, cp.Kubeconfig, onlyYurthosts)
	expectAnswer(t, answerBudget, dns.DNSAddr, "worker-2", "A", "10.96.0.9")
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "AAAA", "fd00::10")

	status := func() (string, error) {
		p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), "status", "--kubeconfig", cp.Kubeconfig, "--verify-dns", dns.DNSAddr)
		err := p.Wait(t, time.Minute)
		return p.Output(), err
	}
	// The sync alone, without install: every name right, and not installed.
	out, err := status()
	if code := exitCode(t, err); code != exitNotInstalled {
		t.Fatalf("status --verify-dns: exit %d, want %d (not installed)\n%s", code, exitNotInstalled, out)
	}
	for _, want := range []string{"master-1", "192.168.0.10,fd00::10 expected 192.168.0.10,fd00::10 OK",
		"worker-1", "10.96.0.9,fd00:10:96::9 expected 10.96.0.9,fd00:10:96::9 OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, " OK") != 3 {
		t.Errorf("want 3 nodes OK:\n%s", out)
	}

	// A deliberately wrong record (the sync is stopped so it does not repair it).
	sync.Stop()
	cp.ApplyConfigMap(t, recordsConfigMap("10.96.0.9\tworker-1", "192.168.0.99\tmaster-1"))
	expectAnswer(t, answerBudget, dns.DNSAddr, "master-1", "A", "192.168.0.99")
	out, err = status()
	if exitCode(t, err) != exitDrifted || !strings.Contains(out, "192.168.0.99       expected 192.168.0.10,fd00::10 MISMATCH") ||
		!strings.Contains(out, "worker-2") || !strings.Contains(out, "FAIL (A: NXDOMAIN)") || !strings.Contains(out, "2 node name(s) resolve wrong") {
		t.Errorf("want the wrong and the missing record reported and a failure, got %v:\n%s", err, out)
	}
}
