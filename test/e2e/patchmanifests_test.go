package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/staticpod"
	"github.com/yurtdns/yurtdns/test/harness"
)

// TestPatchManifestsCommand runs the real binary on kubeadm's manifests:
// dry run, apply, apply again.
func TestPatchManifestsCommand(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "manifests")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"kube-apiserver.yaml", "kube-controller-manager.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "kubeadm", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bin := harness.Binary(t, "tunnel-nodes-sync")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"patch-manifests", "--manifests-dir", dir, "--backup-dir", filepath.Join(root, "backup")}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run("--dry-run"); !strings.Contains(out, "+    - --controllers=-nodelifecycle,*,bootstrapsigner,tokencleaner") ||
		!strings.Contains(out, "+    - --kubelet-preferred-address-types=Hostname,InternalIP,ExternalIP") {
		t.Errorf("dry run diff:\n%s", out)
	}
	patch := filepath.Join(root, "patches", staticpod.KubeadmPatchFile)
	if out := run(); strings.Count(out, ": patched") != 2 || !strings.Contains(out, patch+": written") {
		t.Errorf("apply:\n%s", out)
	}
	if data, err := os.ReadFile(patch); err != nil || !strings.Contains(string(data), "dnsPolicy: ClusterFirstWithHostNet") {
		t.Errorf("the kubeadm patch beside the manifests directory: %v %q", err, data)
	}
	if out := run(); strings.Count(out, ": already applied") != 2 {
		t.Errorf("second apply:\n%s", out)
	}
}
