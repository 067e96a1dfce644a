package staticpod

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/yurtdns/yurtdns/internal/textedit"
)

// kubeadm renders the static pods again on every upgrade, init phase and
// control-plane join. The address types flag survives in kubeadm-config's
// extraArgs; dnsPolicy has no ClusterConfiguration field, so it goes in a
// kubeadm patch (kubernetes/kubeadm#2157), which kubeadm applies when it is
// given the directory (--patches, or UpgradeConfiguration's
// apply/node.patches.directory).

// KubeadmPatchFile is install's patch in that directory: target
// kube-apiserver, a suffix of its own so it sits beside the operator's,
// strategic merge.
const KubeadmPatchFile = "kube-apiserver-yurtdns+strategic.yaml"

const kubeadmPatch = "# yurtdns install: kube-apiserver resolves node names through cluster DNS.\n" +
	"# Give this directory to every kubeadm upgrade, init and join: --patches DIR.\n" +
	"spec:\n  dnsPolicy: ClusterFirstWithHostNet\n"

// writeKubeadmPatch puts install's patch into dir; change is nil when it is
// there already.
func writeKubeadmPatch(dir string, dryRun bool) (*ManifestChange, error) {
	path := filepath.Join(dir, KubeadmPatchFile)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if string(old) == kubeadmPatch {
		return nil, nil
	}
	change := &ManifestChange{Path: path, Changed: true, Diff: textedit.UnifiedDiff(path, old, []byte(kubeadmPatch))}
	if dryRun {
		return change, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the kubeadm patches directory: %w", err)
	}
	return change, writeAtomic(dir, path, []byte(kubeadmPatch), 0o644)
}

// removeKubeadmPatch takes install's patch out of dir (and dir, when it
// leaves it empty); removed is false when it was not there.
func removeKubeadmPatch(dir string, dryRun bool) (removed bool, err error) {
	path := filepath.Join(dir, KubeadmPatchFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil || dryRun {
		return err == nil, err
	}
	if err := os.Remove(path); err != nil {
		return false, err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) == 0 {
		return true, os.Remove(dir)
	}
	return true, nil
}
