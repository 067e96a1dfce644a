package staticpod

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kubeadmDir copies the kubeadm fixtures into a fresh manifests directory.
func kubeadmDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "manifests")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mp := range ControlPlanePatches {
		if err := os.WriteFile(filepath.Join(dir, mp.Component+".yaml"), readFixture(t, mp.Component+".yaml"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		files[e.Name()] = string(data)
	}
	return files
}

func TestPatchManifests(t *testing.T) {
	dir := kubeadmDir(t)
	backups := filepath.Join(filepath.Dir(dir), "yurtdns-backup")
	before := dirFiles(t, dir)

	// Dry run: diffs name each change, nothing is written.
	changes, err := PatchManifests(context.Background(), dir, backups, ManifestOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if !c.Changed || !strings.Contains(c.Diff, "+") {
			t.Errorf("%s: dry run shows no change", c.Path)
		}
	}
	if !strings.Contains(changes[0].Diff, "+    - --controllers=-nodelifecycle,*,bootstrapsigner,tokencleaner") ||
		!strings.Contains(changes[1].Diff, "+  dnsPolicy: ClusterFirstWithHostNet") {
		t.Errorf("diffs do not show the edits:\n%s\n%s", changes[0].Diff, changes[1].Diff)
	}
	if after := dirFiles(t, dir); len(after) != 2 || after["kube-apiserver.yaml"] != before["kube-apiserver.yaml"] {
		t.Fatal("dry run changed the manifests")
	}
	if _, err := os.Stat(backups); err == nil {
		t.Fatal("dry run created the backup directory")
	}

	// Apply: only the two manifests in the directory; originals backed up outside.
	if _, err := PatchManifests(context.Background(), dir, backups, ManifestOptions{}); err != nil {
		t.Fatal(err)
	}
	after := dirFiles(t, dir)
	if len(after) != 2 {
		t.Errorf("manifests directory holds %v", after)
	}
	for name, content := range before {
		if after[name] == content {
			t.Errorf("%s not patched", name)
		}
		backup, err := os.ReadFile(BackupPath(backups, name))
		if err != nil || string(backup) != content {
			t.Errorf("%s backup: %v", name, err)
		}
		if info, _ := os.Stat(filepath.Join(dir, name)); info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600 kept", name, info.Mode().Perm())
		}
	}

	// Again: nothing changes; the first originals stay the backups.
	changes, err = PatchManifests(context.Background(), dir, backups, ManifestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range changes {
		if c.Changed {
			t.Errorf("%s changed on the second run", c.Path)
		}
	}
	for name, content := range before {
		if backup, _ := os.ReadFile(BackupPath(backups, name)); string(backup) != content {
			t.Errorf("%s backup overwritten", name)
		}
	}
}

func TestPatchManifestsAllOrNothing(t *testing.T) {
	dir := kubeadmDir(t)
	// The second manifest (kube-apiserver) is broken: the first must not be written either.
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte("kind: Deployment\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := dirFiles(t, dir)
	_, err := PatchManifests(context.Background(), dir, filepath.Join(t.TempDir(), "backup"), ManifestOptions{})
	if err == nil || !strings.Contains(err.Error(), "not a Pod") {
		t.Fatalf("want a clear error, got %v", err)
	}
	if after := dirFiles(t, dir); after["kube-controller-manager.yaml"] != before["kube-controller-manager.yaml"] {
		t.Error("kube-controller-manager.yaml was written although kube-apiserver.yaml is unexpected")
	}
	good := kubeadmDir(t)
	if _, err := PatchManifests(context.Background(), good, filepath.Join(good, "backup"), ManifestOptions{}); err == nil || !strings.Contains(err.Error(), "inside the manifests directory") {
		t.Errorf("want an error for a backup directory inside the manifests directory, got %v", err)
	}
	if files := dirFiles(t, good); len(files) != 2 {
		t.Errorf("manifests directory holds %d entries after the refusal", len(files))
	}
}

// With KeepNodeLifecycle only kube-apiserver's manifest is patched: the
// controller manager's stays byte for byte.
func TestPatchManifestsKeepsNodeLifecycle(t *testing.T) {
	dir := kubeadmDir(t)
	before := dirFiles(t, dir)
	changes, err := PatchManifests(context.Background(), dir, t.TempDir(), ManifestOptions{KeepNodeLifecycle: true})
	if err != nil || len(changes) != 1 || filepath.Base(changes[0].Path) != "kube-apiserver.yaml" || !changes[0].Changed {
		t.Fatalf("changes %+v, err %v", changes, err)
	}
	after := dirFiles(t, dir)
	if after["kube-controller-manager.yaml"] != before["kube-controller-manager.yaml"] || after["kube-apiserver.yaml"] == before["kube-apiserver.yaml"] {
		t.Errorf("kube-controller-manager.yaml changed or kube-apiserver.yaml not patched")
	}
}
