package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"
)

func TestKubeadmFlags(t *testing.T) {
	for env, want := range map[string]string{
		"KUBELET_KUBEADM_ARGS=\"--node-ip=198.51.100.10 --pod-infra-container-image=p:1\"\n": "--node-ip=198.51.100.10|--pod-infra-container-image=p:1",
		"# comment\nKUBELET_KUBEADM_ARGS=\"\"\n":                                             "",
		"":                                                                                   "",
	} {
		if got := strings.Join(kubeadmFlags(env), "|"); got != want {
			t.Errorf("kubeadmFlags(%q) = %q, want %q", env, got, want)
		}
	}
}

// TestCluster brings the two-node cluster up, checks what the tests built on
// it rely on, and checks that tearing it down leaves nothing on the machine.
func TestCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	sysctlsBefore := readSysctls(t)
	ctx := context.Background()
	started := time.Now()
	c, err := Start(ctx, Config{Dir: filepath.Join(root, "bin", "cluster"), Bin: filepath.Join(root, "bin", "k8s"), Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster up in %s", time.Since(started).Round(100*time.Millisecond))
	out, err := c.Kubectl(ctx, "get", "nodes", "-o", "wide", "--show-labels")
	t.Log(out)
	if err != nil {
		t.Error(err)
	}
	if !strings.Contains(out, "openyurt.io/is-edge-worker=true,") && !strings.Contains(out, NodePoolLabel+"="+EdgePool) {
		t.Error("worker-1 is not labelled as an edge node of the edge pool")
	}
	// The OpenYurt parts: worker-1's kubelet through a ready yurthub, and
	// yurt-tunnel-server's DNS controller writing the records (no sync yet).
	worker := c.Node("worker-1")
	if !worker.ThroughYurthub() {
		t.Error("worker-1's kubelet does not run with yurthub's kubeconfig")
	}
	if ready, err := worker.YurthubGet(ctx, "/v1/readyz"); err != nil || ready != "OK" {
		t.Errorf("yurthub on worker-1: readyz %q, %v", ready, err)
	}
	if metrics, err := worker.YurthubGet(ctx, "/metrics"); err != nil || !strings.Contains(metrics, `git_version="v1.7.0"`) {
		t.Errorf("yurthub on worker-1 is not OpenYurt v1.7.0: %v", err)
	}
	writes, err := c.ConfigMapWrites("yurt-tunnel-nodes", started)
	if err != nil || writes["system:serviceaccount:kube-system:yurt-tunnel-server"] == 0 {
		t.Errorf("yurt-tunnel-server's DNS controller did not write yurt-tunnel-nodes: %v %v", writes, err)
	}
	for _, n := range c.Nodes {
		// The stub resolver: kubeadm's Corefile forwards there, and it never leaves the machine.
		if r, err := n.Dig(ctx, KubeDNSIP(), "example.org", "A"); err != nil || r.Status != "NXDOMAIN" {
			t.Errorf("%s: example.org through kube-dns = %v %s; want NXDOMAIN from the node's stub resolver", n.Name, err, r.Raw)
		}
	}
	out, _ = c.Kubectl(ctx, "get", "pods", "-A", "-o", "wide")
	t.Log(out)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), "yurtdns-") {
		t.Errorf("network namespaces left: %s", out)
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Errorf("cluster directory left: %v", err)
	}
	if after := readSysctls(t); after != sysctlsBefore {
		t.Errorf("kernel settings not restored: before %s, after %s", sysctlsBefore, after)
	}
}

func readSysctls(t *testing.T) string {
	var values []string
	for _, k := range machineSysctls {
		v, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, k+"="+strings.TrimSpace(string(v)))
	}
	return strings.Join(values, " ")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
