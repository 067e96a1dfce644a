package staticpod

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// configHashAnnotation is the hash of the manifest a static pod runs, which
// the kubelet puts on its mirror pod.
const configHashAnnotation = "kubernetes.io/config.hash"

// KubeletWait waits, after a static pod manifest is written, until the
// kubelet runs it: the mirror pod kube-system/<component>-<node> shows a new
// config hash and is Ready (kube-apiserver's mirror pod is read through
// kube-apiserver itself, so that also proves it serves). As kubeadm upgrade
// does, a patched component that does not come back within Timeout gets its
// original manifest back.
type KubeletWait struct {
	Client  client.Client
	Node    string
	Timeout time.Duration
}

func (k *KubeletWait) mirrorPod(component string) string { return MirrorPodName(component, k.Node) }

// MirrorPodName is the name the kubelet gives the mirror pod of a static pod.
func MirrorPodName(component, node string) string { return component + "-" + node }

// hash is the mirror pod's config hash before a write; found is false when
// there is no mirror pod: no kubelet runs the manifests here (e.g. a copy
// of them), and there is nothing to wait for.
func (k *KubeletWait) hash(ctx context.Context, component string) (hash string, found bool, err error) {
	pod := &corev1.Pod{}
	err = kubewait.RetryWhileAway(ctx, k.Timeout, "reading mirror pod "+k.mirrorPod(component), func(ctx context.Context) error {
		return k.Client.Get(ctx, client.ObjectKey{Namespace: tunnelnodes.Namespace, Name: k.mirrorPod(component)}, pod)
	})
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	return pod.Annotations[configHashAnnotation], err == nil, err
}

// running waits for the mirror pod to be Ready with a hash other than not
// (the new manifest's), or equal to is (the original's, after a rollback).
func (k *KubeletWait) running(ctx context.Context, component string, newer bool, hash string) error {
	name := k.mirrorPod(component)
	return kubewait.For(ctx, k.Timeout, component+" not running the "+map[bool]string{true: "patched", false: "original"}[newer]+" manifest",
		func(ctx context.Context) (bool, string, error) {
			pod := &corev1.Pod{}
			if err := k.Client.Get(ctx, client.ObjectKey{Namespace: tunnelnodes.Namespace, Name: name}, pod); err != nil {
				return false, "", client.IgnoreNotFound(err) // the kubelet replaces the mirror pod
			}
			got := pod.Annotations[configHashAnnotation]
			if (got != hash) != newer {
				return false, "mirror pod " + tunnelnodes.Namespace + "/" + name + " still has config hash " + got, nil
			}
			ready := kubewait.PodReady(pod)
			return ready, "mirror pod " + tunnelnodes.Namespace + "/" + name + " not Ready", nil
		})
}

// replace writes data to path (through a temp file in tmpDir) and, with k
// set, waits for the kubelet to run it. rollback, when not nil, is written
// back if the component does not come back, and waited for in turn. note
// says what was waited for.
func (k *KubeletWait) replace(ctx context.Context, component, tmpDir, path string, data, rollback []byte, mode fs.FileMode) (note string, err error) {
	if k == nil {
		return "", writeAtomic(tmpDir, path, data, mode)
	}
	before, found, err := k.hash(ctx, component)
	if err != nil {
		return "", err
	}
	if err := writeAtomic(tmpDir, path, data, mode); err != nil {
		return "", err
	}
	if !found {
		return "no mirror pod " + tunnelnodes.Namespace + "/" + k.mirrorPod(component) + " before the write: no kubelet runs this manifest here, nothing to wait for", nil
	}
	err = k.running(ctx, component, true, before)
	if err == nil {
		return "the kubelet restarted " + component + " on " + k.Node + ": new config hash, Ready", nil
	}
	if rollback == nil {
		return "", err
	}
	if werr := writeAtomic(tmpDir, path, rollback, mode); werr != nil {
		return "", fmt.Errorf("%w; restoring its original manifest failed too: %v", err, werr)
	}
	if back := k.running(ctx, component, false, before); back != nil {
		return "", fmt.Errorf("%w; its original manifest is restored, but %v", err, back)
	}
	return "", fmt.Errorf("%w; its original manifest is restored and it runs again", err)
}
