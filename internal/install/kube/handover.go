package kube

import (
	"context"
	"fmt"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A handover keeps a Service answering while its only pod is replaced.
// Raven's raven-proxy-dns runs one replica with a required one-per-host
// anti-affinity, so its rollout deletes the old pod before the new one can
// be scheduled: without help the Service has no endpoint for seconds. The
// handover runs one extra pod of the template being rolled out (without the
// Deployment's labels, so neither its selector nor its anti-affinity sees
// it) and puts it behind the Service with an EndpointSlice of its own.
type Handover struct {
	Service    string // the Service kept answering
	Deployment string // whose rollout it covers
}

const (
	// handoverManagedBy tells the EndpointSlice controller the slice is not its own.
	handoverManagedBy = "install.yurtdns.io"
	HandoverLabel     = "yurtdns.io/handover"
)

// kubeProxyGrace is how long an endpoint change is given to reach every
// node's kube-proxy where a drain cannot see it happen (the pods' request
// counters cannot be read). kube-proxy syncs at most minSyncPeriod (1 s by
// default) after a change; CoreDNS's lameduck (5 s in every stock
// Corefile) is the same allowance.
var kubeProxyGrace = 5 * time.Second

func (h Handover) name() string { return h.Deployment + "-handover" }

// Begin runs the handover pod from tmpl (reusing one an interrupted run
// left), waits for it to be Ready and puts it behind the Service.
func (h Handover) Begin(ctx context.Context, env *engine.Env, tmpl corev1.PodTemplateSpec) error {
	pod, err := h.ensurePod(ctx, env, tmpl)
	if err != nil {
		return err
	}
	if err := kubewait.For(ctx, env.Options.Timeout, "handover pod "+h.name()+" not Ready", func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, Key(h.name()), pod); err != nil {
			return false, "", fmt.Errorf("reading handover pod %s: %w", h.name(), err)
		}
		return kubewait.PodReady(pod), fmt.Sprintf("phase %q, node %q", pod.Status.Phase, pod.Spec.NodeName), nil
	}); err != nil {
		return err
	}
	ready := true
	slice, err := serviceSlice(ctx, env, h.Service, h.name(), []corev1.Pod{*pod}, discoveryv1.EndpointConditions{Ready: &ready})
	if err != nil {
		return err
	}
	slice.Labels[HandoverLabel] = h.Deployment
	if err := applySlice(ctx, env, slice); err != nil {
		return fmt.Errorf("putting the handover pod behind Service %s: %w", h.Service, err)
	}
	return nil
}

// ensurePod creates the handover pod, or returns the one already running.
func (h Handover) ensurePod(ctx context.Context, env *engine.Env, tmpl corev1.PodTemplateSpec) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := env.Client.Get(ctx, Key(h.name()), pod)
	switch {
	case err == nil && pod.DeletionTimestamp == nil:
		return pod, nil
	case err == nil:
		if err := h.waitPodGone(ctx, env); err != nil {
			return nil, err
		}
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading handover pod %s: %w", h.name(), err)
	}
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, Key(h.Deployment), d); err != nil {
		return nil, fmt.Errorf("reading Deployment %s: %w", h.Deployment, err)
	}
	pod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: h.name(), Namespace: tunnelnodes.Namespace,
			Labels:      map[string]string{HandoverLabel: h.Deployment, engine.ManagedByLabel: "yurtdns"},
			Annotations: tmpl.Annotations,
			// Garbage-collected with the Deployment if install never ends it.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	pod.Spec.Affinity = nil // the anti-affinity keeps the Deployment's own pods apart, not this one
	if err := env.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating handover pod %s: %w", h.name(), err)
	}
	return pod, nil
}

// targetPort is the pod's port for a Service port: its number, or the
// container port of its name.
func targetPort(sp corev1.ServicePort, pod *corev1.Pod) (int32, error) {
	switch {
	case sp.TargetPort.Type == intstr.String:
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == sp.TargetPort.StrVal && p.Protocol == sp.Protocol {
					return p.ContainerPort, nil
				}
			}
		}
		return 0, fmt.Errorf("port %s: no container port named %q", sp.Name, sp.TargetPort.StrVal)
	case sp.TargetPort.IntVal != 0:
		return sp.TargetPort.IntVal, nil
	}
	return sp.Port, nil
}

// End drains the handover pod out of the Service (see drain), then
// deletes it. A no-op without a handover. The note says when the pod did
// not get quiet.
func (h Handover) End(ctx context.Context, env *engine.Env) (note string, err error) {
	pod := &corev1.Pod{}
	switch err := env.Client.Get(ctx, Key(h.name()), pod); {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading handover pod %s: %w", h.name(), err)
	}
	if pod.Status.PodIP != "" {
		d := drain{service: h.Service, slice: h.name()}
		if err := d.start(ctx, env, []corev1.Pod{*pod}); err != nil {
			return "", err
		}
		if note, err = d.finish(ctx, env, []corev1.Pod{*pod}); err != nil {
			return "", err
		}
	}
	if err := client.IgnoreNotFound(env.Client.Delete(ctx, pod)); err != nil {
		return "", fmt.Errorf("deleting handover pod %s: %w", h.name(), err)
	}
	return note, h.waitPodGone(ctx, env)
}

func (h Handover) waitPodGone(ctx context.Context, env *engine.Env) error {
	return kubewait.For(ctx, env.Options.Timeout, "handover pod "+h.name()+" not gone", func(ctx context.Context) (bool, string, error) {
		err := env.Client.Get(ctx, Key(h.name()), &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "terminating", err
	})
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
