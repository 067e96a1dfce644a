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

// kubeadmManifests copies kubeadm's manifests into root/manifests.
func kubeadmManifests(t *testing.T, root string) string {
	t.Helper()
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
	return dir
}

// TestPatchManifestsCommand runs the real binary on kubeadm's manifests:
// dry run, apply, apply again; told to disable the node lifecycle
// controller, it needs no cluster.
func TestPatchManifestsCommand(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := kubeadmManifests(t, root)
	bin := harness.Binary(t, "tunnel-nodes-sync")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"patch-manifests", "--manifests-dir", dir, "--backup-dir", filepath.Join(root, "backup"), "--kcm-nodelifecycle", "disable"}, args...)...)
		cmd.Env = []string{"HOME=" + root} // no kubeconfig
		out, err := cmd.CombinedOutput()
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

// TestPatchManifestsNodeLifecycleAsInstall: patch-manifests's
// --kcm-nodelifecycle defaults to auto, as install's, resolved by install's
// code from the cluster's OpenYurt version: v1.6 or later keeps the node
// lifecycle controller, none turns it off, and without a cluster to read
// auto is refused with the way out.
func TestPatchManifestsNodeLifecycleAsInstall(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	bin := harness.Binary(t, "tunnel-nodes-sync")
	dryRun := func(env []string, args ...string) (string, error) {
		root := t.TempDir()
		cmd := exec.Command(bin, append([]string{"patch-manifests", "--dry-run", "--manifests-dir", kubeadmManifests(t, root), "--backup-dir", filepath.Join(root, "backup")}, args...)...)
		cmd.Env = append([]string{"HOME=" + root}, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	const off = "+    - --controllers=-nodelifecycle,*,bootstrapsigner,tokencleaner"
	if out, err := dryRun(nil, "--kubeconfig", cp.Kubeconfig); err != nil || !strings.Contains(out, off) {
		t.Errorf("auto without OpenYurt: %v, want -nodelifecycle\n%s", err, out)
	}
	if out, err := dryRun([]string{"KUBECONFIG=" + cp.Kubeconfig}); err != nil || !strings.Contains(out, off) {
		t.Errorf("auto with $KUBECONFIG: %v, want -nodelifecycle\n%s", err, out)
	}
	cp.CreateFromFile(t, filepath.Join(ravenFixtures, "yurt-manager.yaml"))
	out, err := dryRun(nil, "--kubeconfig", cp.Kubeconfig)
	if err != nil || strings.Contains(out, "-nodelifecycle") || !strings.Contains(out, "kube-controller-manager left as it is: OpenYurt v1.") {
		t.Errorf("auto with OpenYurt v1.6 or later: %v, want kube-controller-manager left alone\n%s", err, out)
	}
	if out, err := dryRun(nil, "--kubeconfig", cp.Kubeconfig, "--kcm-nodelifecycle", "disable"); err != nil || !strings.Contains(out, off) {
		t.Errorf("disable: %v\n%s", err, out)
	}
	if out, err := dryRun(nil); err == nil || !strings.Contains(out, "no kubeconfig") || !strings.Contains(out, "--kcm-nodelifecycle auto reads the OpenYurt version from the cluster; or give disable or keep") {
		t.Errorf("auto without a cluster: %v, want refused\n%s", err, out)
	}
}
