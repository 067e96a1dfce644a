// Package staticpod edits kubeadm's static pod manifests for the
// control-plane step: the edits of kube-controller-manager's and
// kube-apiserver's commands on YAML node trees (every other line keeps its
// bytes), the originals kept in a backup directory, atomic writes, and the
// wait for the kubelet to run each new manifest, with kubeadm upgrade's
// rollback of one that does not come up.
package staticpod
