package realcluster

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/preflight"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCheckOnTheCluster: check passes on the cluster as kubeadm and OpenYurt
// made it, then fails, naming what to do, on what an operator meets: a
// yurt-tunnel-server patched back to RollingUpdate, this version's
// tunnel-nodes-sync image removed from worker-1's containerd (as the
// kubelet then lists it), and an edge node that joined without yurthub.
func TestCheckOnTheCluster(t *testing.T) {
	ctx := context.Background()
	if r, code := checkReport(t); code != 0 || r.Result == preflight.Fail {
		t.Fatalf("check on the cluster as kubeadm made it: exit %d, %+v", code, r)
	}

	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	syncImage := "docker.io/yurtdns/tunnel-nodes-sync:" + strings.TrimSpace(string(version))
	worker := kc.Node("worker-1")
	if _, err := worker.Run(ctx, "ctr", "-n", "k8s.io", "images", "rm", syncImage); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := worker.ImportImages(filepath.Join(root, "bin", "tunnel-nodes-sync.oci.tar")); err != nil {
			t.Errorf("importing %s on worker-1 again: %v", syncImage, err)
		}
	})
	// The kubelet lists the node's images again every half minute or so.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(n.Status.Images, func(i corev1.ContainerImage) bool { return slices.Contains(i.Names, syncImage) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker-1's kubelet still lists %s 3m after ctr images rm", syncImage)
		}
		time.Sleep(2 * time.Second)
	}

	patch := func(strategy string) {
		t.Helper()
		p := `{"spec":{"strategy":{"type":"` + strategy + `","rollingUpdate":null}}}`
		if out, err := kc.Kubectl(ctx, "-n", "kube-system", "patch", "deployment", "yurt-tunnel-server", "--type", "merge", "-p", p); err != nil {
			t.Fatalf("kubectl patch: %v\n%s", err, out)
		}
	}
	patch("RollingUpdate")
	t.Cleanup(func() { patch("Recreate") })

	const bare = "edge-without-yurthub"
	edge := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: bare, Labels: map[string]string{tunnelnodes.EdgeNodeLabel: "true"}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, edge, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cs.CoreV1().Nodes().Delete(context.Background(), bare, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	})

	// What the operator reads.
	out, err := runSync(t, "check")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("check: %v, want exit status 2 for failed checks", err)
	}
	r, code := checkReport(t)
	if code != 2 || r.Result != preflight.Fail {
		t.Errorf("check -o json: exit %d, result %s, want 2 and fail", code, r.Result)
	}
	want := map[string]struct {
		nodes        []string
		found, fixed string
	}{
		"tunnel-server-strategy": {nil, "has strategy RollingUpdate", "Recreate"},
		"yurthub":                {[]string{bare}, "no yurthub on edge node(s) " + bare, "yurthub"},
		"images":                 {[]string{bare, "worker-1"}, syncImage + " missing on " + bare + ", worker-1", "ctr -n k8s.io images import"},
	}
	for _, c := range r.Checks {
		w, ok := want[c.Name]
		if !ok {
			if c.Outcome == preflight.Fail {
				t.Errorf("check %s failed: %+v", c.Name, c)
			}
			continue
		}
		delete(want, c.Name)
		if c.Outcome != preflight.Fail || !strings.Contains(c.Found, w.found) || !strings.Contains(c.Action, w.fixed) ||
			w.nodes != nil && !slices.Equal(c.Nodes, w.nodes) {
			t.Errorf("check %s: %+v, want failed, found %q, nodes %v, an action with %q", c.Name, c, w.found, w.nodes, w.fixed)
		}
		if !strings.Contains(out, c.Line()) {
			t.Errorf("check's text lacks the %s line:\n%s", c.Name, out)
		}
	}
	for name := range want {
		t.Errorf("check -o json has no %s check", name)
	}
}

// checkReport runs check -o json and returns its report and exit code.
func checkReport(t *testing.T) (preflight.Report, int) {
	t.Helper()
	cmd := exec.Command(syncBin, "check", "-o", "json", "--kubeconfig", kc.Kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r preflight.Report
	if err := json.Unmarshal(stdout, &r); err != nil {
		t.Fatalf("check -o json (exit %d): stdout is not the report: %v\n%s%s", code, err, stdout, stderr.String())
	}
	return r, code
}
