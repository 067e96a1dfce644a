package kube

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/staticpod"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// healthComponents are the static pods whose mirror pods' Ready says a
// control-plane node serves, and what Ready means for each: kubeadm gives
// kube-apiserver and etcd readiness probes on their /readyz.
var healthComponents = []struct{ component, ready string }{
	{"kube-apiserver", "kube-apiserver serving"},
	{"etcd", "etcd healthy"},
}

// ControlPlaneNodeHealth is what install waits for on a control-plane node
// after its kubelet restarted kube-apiserver, before it touches the next
// node: the mirror pods kube-system/kube-apiserver-<node> and, with stacked
// etcd, etcd-<node> Ready. On several control-plane nodes that keeps a
// quorum of etcd members and the other apiservers serving throughout.
type ControlPlaneNodeHealth struct {
	Node string
	// MirrorPods are the ones the node has, and ready what each Ready means.
	MirrorPods, ready []string
}

// ReadControlPlaneNodeHealth finds which mirror pods of the node to wait
// for: those there before the restart (the kubelet replaces a mirror pod
// whose manifest changed, so one may be gone for a moment after). A node
// with external etcd has no etcd-<node>; one found by its label alone may
// have neither.
func ReadControlPlaneNodeHealth(ctx context.Context, env *engine.Env, node string) (ControlPlaneNodeHealth, error) {
	h := ControlPlaneNodeHealth{Node: node}
	for _, c := range healthComponents {
		name := staticpod.MirrorPodName(c.component, node)
		err := kubewait.RetryWhileAway(ctx, env.Options.Timeout, "reading mirror pod "+name, func(ctx context.Context) error {
			return env.Client.Get(ctx, Key(name), &corev1.Pod{})
		})
		switch {
		case err == nil:
			h.MirrorPods, h.ready = append(h.MirrorPods, name), append(h.ready, c.ready)
		case !apierrors.IsNotFound(err):
			return h, err
		}
	}
	return h, nil
}

// After says what was waited for and how long it all took: "kube-apiserver
// serving, etcd healthy after 41s".
func (h ControlPlaneNodeHealth) After(took time.Duration) string {
	took = took.Round(time.Second)
	if len(h.ready) == 0 {
		return fmt.Sprintf("complete after %s; no mirror pod kube-apiserver-%s or etcd-%s to wait for", took, h.Node, h.Node)
	}
	return fmt.Sprintf("%s after %s", strings.Join(h.ready, ", "), took)
}

// Wait waits, for at most --timeout, until each of the node's mirror pods
// is Ready. The apiserver answering may be restarting itself (one control
// plane); kubewait.For waits that out.
func (h ControlPlaneNodeHealth) Wait(ctx context.Context, env *engine.Env) error {
	if len(h.MirrorPods) == 0 {
		return nil
	}
	return kubewait.For(ctx, env.Options.Timeout, strings.Join(h.MirrorPods, " and ")+" not Ready", func(ctx context.Context) (bool, string, error) {
		var waiting []string
		for _, name := range h.MirrorPods {
			pod := &corev1.Pod{}
			err := env.Client.Get(ctx, Key(name), pod)
			switch {
			case apierrors.IsNotFound(err): // the kubelet replaces it
				waiting = append(waiting, name+" not there")
			case err != nil:
				return false, "", err
			case !kubewait.PodReady(pod):
				waiting = append(waiting, name+" not Ready")
			}
		}
		return len(waiting) == 0, strings.Join(waiting, ", "), nil
	})
}
