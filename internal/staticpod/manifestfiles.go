package staticpod

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/textedit"

	"github.com/google/renameio/v2"
)

// ManifestPatch is one static pod manifest and the edit install makes to it.
type ManifestPatch struct {
	Component string // the static pod's name; the file is Component.yaml
	Patch     func([]byte) ([]byte, bool, error)
	// Unpatch takes the edit out of a manifest rendered again since install
	// (kubeadm upgrade, with install's flags from kubeadm-config and its
	// kubeadm patch): each edited field as the original had it.
	Unpatch func(manifest, orig []byte) ([]byte, bool, error)
}

// The control-plane components the step edits (their static pods' names).
const (
	kubeControllerManager = "kube-controller-manager"
	kubeAPIServer         = "kube-apiserver"
)

// ControlPlanePatches are the manifest edits of the control-plane step, in
// the order they are applied (each live before the next).
var ControlPlanePatches = []ManifestPatch{
	{Component: kubeControllerManager, Patch: patchControllerManager, Unpatch: unpatchControllerManager},
	{Component: kubeAPIServer, Patch: patchAPIServer, Unpatch: unpatchAPIServer},
}

// ManifestChange is the outcome for one file.
type ManifestChange struct {
	Path    string
	Changed bool
	Diff    string // unified diff; empty when unchanged
	Note    string // what was waited for after the write
}

// ManifestOptions tune PatchManifests and RestoreManifests.
type ManifestOptions struct {
	DryRun bool
	// Kubelet, when set, waits after each write until the kubelet runs the
	// new manifest (and rolls a patch back that does not come up).
	Kubelet *KubeletWait
	// TestOnlyExtraFlags adds a flag to a component's command in the patch
	// (component → flag): tests make a patch that cannot come up with it.
	TestOnlyExtraFlags map[string]string
	// KeepNodeLifecycle leaves kube-controller-manager's manifest as it is:
	// since OpenYurt v1.6 its node lifecycle controller may keep running
	// (yurt-manager keeps the pods of autonomous nodes served).
	KeepNodeLifecycle bool
	// KubeadmPatchesDir, when set, gets install's kubeadm patch
	// (KubeadmPatchFile), so that kubeadm renders dnsPolicy too.
	KubeadmPatchesDir string
}

// patches are the edits PatchManifests makes under o.
func (o ManifestOptions) patches() []ManifestPatch {
	if !o.KeepNodeLifecycle {
		return ControlPlanePatches
	}
	return slices.DeleteFunc(slices.Clone(ControlPlanePatches), func(mp ManifestPatch) bool { return mp.Component == kubeControllerManager })
}

// PatchManifests edits the static pod manifests in manifestsDir. Every file
// is read and patched in memory first: one unexpected manifest stops
// everything before a byte is written. Then each changed file's original is
// kept in backupDir (a file already patched is not backed up again),
// and the new content is written to a temp file in backupDir and renamed into
// place, so the kubelet never sees a half-written manifest, and nothing but
// the manifests themselves is ever inside manifestsDir (the kubelet runs
// every file there). With o.Kubelet each patched component runs before the
// next file is written, and one that does not come back gets its original
// back and stops the run. With o.DryRun nothing is written.
func PatchManifests(ctx context.Context, manifestsDir, backupDir string, o ManifestOptions) ([]ManifestChange, error) {
	type planned struct {
		component string
		path      string
		old, next []byte
		mode      fs.FileMode
		unpatch   func(manifest, orig []byte) ([]byte, bool, error)
	}
	var plan []planned
	var changes []ManifestChange
	if o.KubeadmPatchesDir != "" {
		// First: a manifest patched is never without the patch kubeadm
		// needs to render it again so.
		change, err := writeKubeadmPatch(o.KubeadmPatchesDir, o.DryRun)
		if err != nil {
			return nil, fmt.Errorf("writing the kubeadm patch: %w", err)
		}
		if change != nil {
			changes = append(changes, *change)
		}
	}
	for _, mp := range o.patches() {
		path := filepath.Join(manifestsDir, mp.Component+".yaml")
		old, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		info, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		next, changed, err := mp.Patch(old)
		if flag, ok := o.TestOnlyExtraFlags[mp.Component]; ok && err == nil && changed {
			next, err = addFlag(next, mp.Component, flag)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w (nothing was changed)", path, err)
		}
		changes = append(changes, ManifestChange{Path: path, Changed: changed})
		if changed {
			changes[len(changes)-1].Diff = textedit.UnifiedDiff(path, old, next)
			plan = append(plan, planned{component: mp.Component, path: path, old: old, next: next, mode: info.Mode().Perm(), unpatch: mp.Unpatch})
		}
	}
	if o.DryRun || len(plan) == 0 {
		return changes, nil
	}
	if err := checkOutside(manifestsDir, backupDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(backupDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating backup directory: %w", err)
	}
	for _, p := range plan {
		// The file as it is before this patch is its original: a manifest
		// install patched is not patched again, so one that needs it was
		// rendered again since (kubeadm upgrade), and an older backup would
		// put back an older version on revert. What kubeadm rendered from
		// install's flags in kubeadm-config goes back as the older backup
		// had it.
		backup, orig := BackupPath(backupDir, p.path), p.old
		if prev, err := os.ReadFile(backup); err == nil {
			if orig, _, err = p.unpatch(p.old, prev); err != nil {
				return nil, fmt.Errorf("%s: %w", backup, err)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if err := writeAtomic(backupDir, backup, orig, 0o600); err != nil {
			return nil, fmt.Errorf("backing up %s: %w", p.path, err)
		}
		note, err := o.Kubelet.replace(ctx, p.component, backupDir, p.path, p.next, p.old, p.mode)
		if err != nil {
			return changes, fmt.Errorf("writing %s: %w", p.path, err)
		}
		changes[slices.IndexFunc(changes, func(c ManifestChange) bool { return c.Path == p.path })].Note = note
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
// to path (tmpDir must be on the same filesystem as path); the file gets
// mode (or keeps the mode of the file it replaces).
func writeAtomic(tmpDir, path string, data []byte, mode fs.FileMode) error {
	return renameio.WriteFile(path, data, mode, renameio.WithTempDir(tmpDir), renameio.WithStaticPermissions(mode))
}

// RestoreManifests puts back each original kept in backupDir while the
// manifest is still exactly what install wrote. A manifest rendered again
// since that still carries install's edits (kubeadm upgrade with them in
// kubeadm-config and its patches) gets only those edits taken out, so a
// newer version's manifest never goes back to the older original. One
// changed since without install's edits is left alone and named in kept.
// With o.Kubelet each restored component runs before the next file.
func RestoreManifests(ctx context.Context, manifestsDir, backupDir string, o ManifestOptions) (restored, kept []string, err error) {
	if o.KubeadmPatchesDir != "" {
		removed, err := removeKubeadmPatch(o.KubeadmPatchesDir, o.DryRun)
		if err != nil {
			return nil, nil, fmt.Errorf("removing the kubeadm patch: %w", err)
		}
		if removed {
			restored = append(restored, filepath.Join(o.KubeadmPatchesDir, KubeadmPatchFile))
		}
	}
	for _, mp := range ControlPlanePatches {
		path := filepath.Join(manifestsDir, mp.Component+".yaml")
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
		next := orig
		switch {
		case string(cur) == string(orig):
			continue
		case string(cur) != string(patched):
			_, lacksEdits, err := mp.Patch(cur)
			if err != nil {
				return nil, nil, err
			}
			if lacksEdits {
				kept = append(kept, path)
				continue
			}
			if next, _, err = mp.Unpatch(cur, orig); err != nil {
				return nil, nil, err
			}
		}
		if !o.DryRun {
			info, err := os.Stat(path)
			if err != nil {
				return nil, nil, err
			}
			if _, err := o.Kubelet.replace(ctx, mp.Component, backupDir, path, next, nil, info.Mode().Perm()); err != nil {
				return nil, nil, fmt.Errorf("restoring %s: %w", path, err)
			}
		}
		restored = append(restored, path)
	}
	return restored, kept, nil
}
