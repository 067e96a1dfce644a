package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// ManifestPatch is one static pod manifest and the edit install makes to it.
type ManifestPatch struct {
	File  string // base name in the manifests directory
	Patch func([]byte) ([]byte, bool, error)
}

// ControlPlanePatches are the manifest edits of the control-plane step.
var ControlPlanePatches = []ManifestPatch{
	{File: "kube-controller-manager.yaml", Patch: PatchControllerManager},
	{File: "kube-apiserver.yaml", Patch: PatchAPIServer},
}

// ManifestChange is the outcome for one file.
type ManifestChange struct {
	Path    string
	Changed bool
	Diff    string // unified diff; empty when unchanged
}

// PatchManifests edits the static pod manifests in manifestsDir. Every file
// is read and patched in memory first: one unexpected manifest stops
// everything before a byte is written. Then each changed file's original is
// kept in backupDir (once: a later run never overwrites the first original),
// and the new content is written to a temp file in backupDir and renamed into
// place, so the kubelet never sees a half-written manifest, and nothing but
// the manifests themselves is ever inside manifestsDir (the kubelet runs
// every file there). With dryRun nothing is written.
func PatchManifests(manifestsDir, backupDir string, dryRun bool) ([]ManifestChange, error) {
	type planned struct {
		path      string
		old, next []byte
		mode      fs.FileMode
	}
	var plan []planned
	var changes []ManifestChange
	for _, mp := range ControlPlanePatches {
		path := filepath.Join(manifestsDir, mp.File)
		old, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		info, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		next, changed, err := mp.Patch(old)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (nothing was changed)", path, err)
		}
		c := ManifestChange{Path: path, Changed: changed}
		if changed {
			c.Diff = unifiedDiff(path, old, next)
			plan = append(plan, planned{path: path, old: old, next: next, mode: info.Mode().Perm()})
		}
		changes = append(changes, c)
	}
	if dryRun || len(plan) == 0 {
		return changes, nil
	}
	if err := checkOutside(manifestsDir, backupDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(backupDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating backup directory: %w", err)
	}
	for _, p := range plan {
		backup := BackupPath(backupDir, p.path)
		if _, err := os.Stat(backup); errors.Is(err, fs.ErrNotExist) {
			if err := writeAtomic(backupDir, backup, p.old, 0o600); err != nil {
				return nil, fmt.Errorf("backing up %s: %w", p.path, err)
			}
		}
		if err := writeAtomic(backupDir, p.path, p.next, p.mode); err != nil {
			return nil, fmt.Errorf("writing %s: %w", p.path, err)
		}
	}
	return changes, nil
}

// BackupPath is where the original of a manifest is kept.
func BackupPath(backupDir, manifest string) string {
	return filepath.Join(backupDir, filepath.Base(manifest)+".orig")
}

// checkOutside refuses a backup directory inside the manifests directory.
func checkOutside(manifestsDir, backupDir string) error {
	m, err := filepath.Abs(manifestsDir)
	if err != nil {
		return err
	}
	b, err := filepath.Abs(backupDir)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(m, b)
	if err != nil {
		return err
	}
	if outside := rel == ".." || strings.HasPrefix(rel, "../"); !outside {
		return fmt.Errorf("backup directory %s is inside the manifests directory %s: the kubelet would run the backups", backupDir, manifestsDir)
	}
	return nil
}

// writeAtomic writes data to a temp file in tmpDir, syncs it and renames it
// to path (tmpDir must be on the same filesystem as path).
func writeAtomic(tmpDir, path string, data []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(tmpDir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// unifiedDiff renders the change of one file for --dry-run.
func unifiedDiff(path string, old, next []byte) string {
	diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(old)), B: difflib.SplitLines(string(next)),
		FromFile: path, ToFile: path + " (yurtdns)", Context: 2,
	})
	return diff
}

// RestoreManifests puts back each original kept in backupDir while the
// manifest is still exactly what install wrote; a manifest changed since is
// left alone and named in kept.
func RestoreManifests(manifestsDir, backupDir string, dryRun bool) (restored, kept []string, err error) {
	for _, mp := range ControlPlanePatches {
		path := filepath.Join(manifestsDir, mp.File)
		orig, err := os.ReadFile(BackupPath(backupDir, path))
		if errors.Is(err, fs.ErrNotExist) {
			continue // install never changed this one
		}
		if err != nil {
			return nil, nil, err
		}
		cur, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		patched, _, err := mp.Patch(orig)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case string(cur) == string(orig):
			continue
		case string(cur) != string(patched):
			kept = append(kept, path)
			continue
		}
		if !dryRun {
			info, err := os.Stat(path)
			if err != nil {
				return nil, nil, err
			}
			if err := writeAtomic(backupDir, path, orig, info.Mode().Perm()); err != nil {
				return nil, nil, fmt.Errorf("restoring %s: %w", path, err)
			}
		}
		restored = append(restored, path)
	}
	return restored, kept, nil
}
