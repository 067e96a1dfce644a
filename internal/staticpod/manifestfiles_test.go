package staticpod

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
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

// The ways a newer kubeadm renders a manifest install patched.
const (
	withoutEdits = iota // install's flags taken out of kubeadm-config
	flagsOnly           // kubeadm-config's flags, no --patches (no dnsPolicy)
	allEdits            // kubeadm-config's flags and install's kubeadm patch
)

// upgraded is a manifest as a newer kubeadm renders it: version moved on; a
// flag from kubeadm-config's extraArgs after kubeadm's own flags.
func upgraded(t *testing.T, mp ManifestPatch, render int) []byte {
	t.Helper()
	data := []byte(strings.ReplaceAll(string(readFixture(t, mp.Component+".yaml")), ":v1.37.1", ":v1.38.0"))
	if render == withoutEdits {
		return data
	}
	for _, flag := range []string{"kubelet-preferred-address-types", "controllers"} {
		data = []byte(regexp.MustCompile(`(?m)^    - --`+flag+`=.*\n`).ReplaceAllString(string(data), ""))
	}
	data, _, err := mp.Patch(data)
	if err != nil {
		t.Fatal(err)
	}
	if render == flagsOnly {
		data = []byte(strings.Replace(string(data), "  dnsPolicy: ClusterFirstWithHostNet\n", "", 1))
	}
	return data
}

// After a kubeadm upgrade, revert never puts an older version's original
// back: a manifest kubeadm rendered with install's edits loses just those;
// one rendered without them, then patched by install again, gets the
// upgraded original back byte for byte.
func TestRestoreAfterKubeadmUpgrade(t *testing.T) {
	for _, render := range []int{allEdits, flagsOnly, withoutEdits} {
		t.Run(fmt.Sprintf("rendered %d", render), func(t *testing.T) {
			ctx := context.Background()
			dir := kubeadmDir(t)
			backups := filepath.Join(filepath.Dir(dir), "yurtdns-backup")
			if _, err := PatchManifests(ctx, dir, backups, ManifestOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, mp := range ControlPlanePatches {
				if err := os.WriteFile(filepath.Join(dir, mp.Component+".yaml"), upgraded(t, mp, render), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if render != allEdits {
				// The plain upgrade undid them: install applies them again.
				if _, err := PatchManifests(ctx, dir, backups, ManifestOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			restored, kept, err := RestoreManifests(ctx, dir, backups, ManifestOptions{})
			if err != nil || len(restored) != 2 || len(kept) != 0 {
				t.Fatalf("restored %v kept %v: %v", restored, kept, err)
			}
			for _, mp := range ControlPlanePatches {
				got, _ := os.ReadFile(filepath.Join(dir, mp.Component+".yaml"))
				if want := upgraded(t, mp, withoutEdits); string(got) != string(want) {
					t.Errorf("%s after revert:\n%s\nwant\n%s", mp.Component, got, want)
				}
			}
		})
	}
}

// A manifest changed since install so that it lacks install's edits is
// someone else's: revert leaves it and names it.
func TestRestoreLeavesAManifestWithoutInstallsEdits(t *testing.T) {
	ctx := context.Background()
	dir := kubeadmDir(t)
	backups := filepath.Join(filepath.Dir(dir), "yurtdns-backup")
	if _, err := PatchManifests(ctx, dir, backups, ManifestOptions{}); err != nil {
		t.Fatal(err)
	}
	apiserver := ControlPlanePatches[1]
	path := filepath.Join(dir, apiserver.Component+".yaml")
	if err := os.WriteFile(path, upgraded(t, apiserver, withoutEdits), 0o600); err != nil {
		t.Fatal(err)
	}
	restored, kept, err := RestoreManifests(ctx, dir, backups, ManifestOptions{})
	if err != nil || len(restored) != 1 || len(kept) != 1 || kept[0] != path {
		t.Fatalf("restored %v kept %v: %v", restored, kept, err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(upgraded(t, apiserver, withoutEdits)) {
		t.Errorf("kube-apiserver.yaml was changed:\n%s", got)
	}
}

// The kubeadm patch goes in with the manifests and out with them: kubeadm
// given the directory renders dnsPolicy, and revert leaves no directory of ours.
func TestKubeadmPatch(t *testing.T) {
	ctx := context.Background()
	dir := kubeadmDir(t)
	patches := filepath.Join(t.TempDir(), "patches")
	o := ManifestOptions{KubeadmPatchesDir: patches}
	changes, err := PatchManifests(ctx, dir, filepath.Join(filepath.Dir(dir), "backup"), o)
	if err != nil || len(changes) != 3 || !strings.Contains(changes[0].Diff, "+  dnsPolicy: ClusterFirstWithHostNet") {
		t.Fatalf("%v %+v", err, changes)
	}
	data, err := os.ReadFile(filepath.Join(patches, KubeadmPatchFile))
	if err != nil {
		t.Fatal(err)
	}
	var patch corev1.Pod
	if err := yaml.UnmarshalStrict(data, &patch); err != nil || patch.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("patch %q: %v", data, err)
	}
	if changes, _ := PatchManifests(ctx, dir, filepath.Join(filepath.Dir(dir), "backup"), o); len(changes) != 2 {
		t.Errorf("second run: %+v", changes)
	}
	restored, _, err := RestoreManifests(ctx, dir, filepath.Join(filepath.Dir(dir), "backup"), o)
	if err != nil || len(restored) != 3 {
		t.Fatalf("restored %v: %v", restored, err)
	}
	if _, err := os.Stat(patches); !os.IsNotExist(err) {
		t.Errorf("patches directory left: %v", err)
	}
}
