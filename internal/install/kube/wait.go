package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The conditions install waits for, each polled by kubewait.For.

// What the DaemonSet controller writes on a DaemonSet and its pods: the
// generation of the template a pod was made from.
const (
	TemplateGenerationAnnotation = "deprecated.daemonset.template.generation"
	TemplateGenerationLabel      = "pod-template-generation"
)

// apiServerReady is /readyz answering ok.
func apiServerReady(env *engine.Env) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		body, err := env.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			if apierrors.IsInternalError(err) { // a post-start hook not done yet
				return false, "readyz: " + strings.TrimSpace(string(body)), nil
			}
			return false, "", err
		}
		return string(body) == "ok", "readyz: " + string(body), nil
	}
}

// WaitAPIServerReady waits for /readyz after something restarted kube-apiserver.
func WaitAPIServerReady(ctx context.Context, env *engine.Env) error {
	if env.Clientset == nil { // the unit tests' fake client: no apiserver
		return nil
	}
	return kubewait.For(ctx, env.Options.Timeout, "kube-apiserver not ready", apiServerReady(env))
}

// ReadyNodes splits the nodes into Ready ones (condition Ready True) and the
// others. A NotReady node (an edge node cut off from the cloud is normal in
// OpenYurt) runs nothing new until it is back, so waits skip it.
func ReadyNodes(ctx context.Context, env *engine.Env) (ready []corev1.Node, notReady []string, err error) {
	nodes := &corev1.NodeList{}
	if err := env.Client.List(ctx, nodes); err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if NodeReady(&n) {
			ready = append(ready, n)
		} else {
			notReady = append(notReady, n.Name)
		}
	}
	slices.Sort(notReady)
	return ready, notReady, nil
}

func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ControlledPods lists the pods in kube-system whose controller is one of owners.
func ControlledPods(ctx context.Context, env *engine.Env, selector *metav1.LabelSelector, owners ...types.UID) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
		ref := metav1.GetControllerOf(&p)
		return ref == nil || !slices.Contains(owners, ref.UID)
	}), nil
}

// DaemonSetOnReadyNodes is the DaemonSet's rollout done where it can be: on
// every Ready node its nodeSelector matches, a pod of its current template
// is Ready and no pod of an older one is left running. Pods on NotReady nodes are not waited for (their names go to
// *notReady). The pods' IPs are returned for the Service check.
func DaemonSetOnReadyNodes(env *engine.Env, name string, notReady *[]string, podIPs *[]string) kubewait.Condition {
	return daemonSetOnReadyNodes(env, name, notReady, podIPs, false)
}

// DaemonSetSurged is DaemonSetOnReadyNodes with the older pods still
// running beside the new ones, as in a held roll (see RollDaemonSet).
func DaemonSetSurged(env *engine.Env, name string, notReady *[]string, podIPs *[]string) kubewait.Condition {
	return daemonSetOnReadyNodes(env, name, notReady, podIPs, true)
}

func daemonSetOnReadyNodes(env *engine.Env, name string, notReady *[]string, podIPs *[]string, oldMayRun bool) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		ds := &appsv1.DaemonSet{}
		if err := env.Client.Get(ctx, Key(name), ds); err != nil {
			return false, "", fmt.Errorf("reading DaemonSet %s: %w", name, err)
		}
		if ds.Status.ObservedGeneration < ds.Generation {
			return false, "its controller has not seen the change yet", nil
		}
		nodes, unready, err := ReadyNodes(ctx, env)
		if err != nil {
			return false, "", err
		}
		*notReady = unready
		pods, err := ControlledPods(ctx, env, ds.Spec.Selector, ds.UID)
		if err != nil {
			return false, "", err
		}
		// The apiserver counts template changes in this annotation, and the
		// DaemonSet controller labels each pod with the count it was made from.
		current := ds.Annotations[TemplateGenerationAnnotation]
		selector := labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector)
		var want, have int
		var missing []string
		*podIPs = (*podIPs)[:0]
		for _, n := range nodes {
			if !selector.Matches(labels.Set(n.Labels)) {
				continue
			}
			want++
			i := slices.IndexFunc(pods, func(p corev1.Pod) bool {
				return p.Spec.NodeName == n.Name && p.Labels[TemplateGenerationLabel] == current && kubewait.PodReady(&p)
			})
			// A rolling update is done on the node once its old pod is
			// being deleted too (the surge pod was Ready minReadySeconds).
			old := slices.ContainsFunc(pods, func(p corev1.Pod) bool {
				return p.Spec.NodeName == n.Name && p.Labels[TemplateGenerationLabel] != current && p.DeletionTimestamp == nil
			})
			if i < 0 || old && !oldMayRun {
				missing = append(missing, n.Name)
				continue
			}
			have++
			*podIPs = append(*podIPs, pods[i].Status.PodIP)
		}
		progress := fmt.Sprintf("%d of %d Ready nodes run a Ready pod of the current template", have, want)
		if !oldMayRun {
			progress += " and none of an older one"
		}
		if len(missing) > 0 {
			progress += "; waiting on " + strings.Join(missing, ", ")
		}
		return want > 0 && have == want, progress, nil
	}
}

// ReadDeployment reads a kube-system Deployment and the replicas it wants
// (1 when unset).
func ReadDeployment(ctx context.Context, env *engine.Env, name string) (*appsv1.Deployment, int32, error) {
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, Key(name), d); err != nil {
		return nil, 0, fmt.Errorf("reading Deployment %s: %w", name, err)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d, want, nil
}

// DeploymentServing is the Deployment available and its Ready pods' IPs
// (at least as many as its replicas) returned for the Service check.
func DeploymentServing(env *engine.Env, name string, podIPs *[]string) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		d, want, err := ReadDeployment(ctx, env, name)
		if err != nil {
			return false, "", err
		}
		progress := fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, want)
		if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < want {
			return false, progress, nil
		}
		pods, err := DeploymentPods(ctx, env, d)
		if err != nil {
			return false, "", err
		}
		*podIPs = (*podIPs)[:0]
		for _, p := range pods {
			if kubewait.PodReady(&p) {
				*podIPs = append(*podIPs, p.Status.PodIP)
			}
		}
		return len(*podIPs) >= int(want), fmt.Sprintf("%s; %d pods Ready", progress, len(*podIPs)), nil
	}
}

// ServiceEndpointsReady is every one of podIPs a ready endpoint in the
// Service's EndpointSlices: kube-proxy sends the Service's traffic to them.
func ServiceEndpointsReady(env *engine.Env, service string, podIPs *[]string) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		eps := &discoveryv1.EndpointSliceList{}
		if err := env.Client.List(ctx, eps, client.InNamespace(tunnelnodes.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
			return false, "", fmt.Errorf("listing EndpointSlices of Service %s: %w", service, err)
		}
		ready := map[string]bool{}
		for _, s := range eps.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready { // nil means ready
					for _, a := range e.Addresses {
						ready[a] = true
					}
				}
			}
		}
		var missing []string
		for _, ip := range *podIPs {
			if !ready[ip] {
				missing = append(missing, ip)
			}
		}
		progress := fmt.Sprintf("%d of %d pod IPs are ready endpoints", len(*podIPs)-len(missing), len(*podIPs))
		return len(*podIPs) > 0 && len(missing) == 0, progress, nil
	}
}

// Both is a then b, polled together so that b sees what a found.
func Both(a, b kubewait.Condition) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		done, progress, err := a(ctx)
		if !done || err != nil {
			return done, progress, err
		}
		return b(ctx)
	}
}

// DeploymentRolledOut is a Deployment's rollout done, as `kubectl rollout
// status` has it — its controller saw the change, every replica is updated
// and available — and at least replicas pods of the current template
// (containers with its images, commands and args) Ready. Their IPs go to
// *podIPs when it is not nil, for the Service check.
func DeploymentRolledOut(env *engine.Env, name string, podIPs *[]string) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		d, want, err := ReadDeployment(ctx, env, name)
		if err != nil {
			return false, "", err
		}
		s := d.Status
		progress := fmt.Sprintf("%d of %d replicas updated, %d available, %d in all", s.UpdatedReplicas, want, s.AvailableReplicas, s.Replicas)
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas < want || s.AvailableReplicas < want || s.Replicas > want {
			return false, progress, nil
		}
		pods, err := DeploymentPods(ctx, env, d)
		if err != nil {
			return false, "", err
		}
		var ips []string
		for _, p := range pods {
			if kubewait.PodReady(&p) && sameContainers(p.Spec.Containers, d.Spec.Template.Spec.Containers) {
				ips = append(ips, p.Status.PodIP)
			}
		}
		if podIPs != nil {
			*podIPs = ips
		}
		return len(ips) >= int(want), fmt.Sprintf("%s; %d pods of the current template Ready", progress, len(ips)), nil
	}
}

// DeploymentPods are the pods of the Deployment's ReplicaSets.
func DeploymentPods(ctx context.Context, env *engine.Env, d *appsv1.Deployment) ([]corev1.Pod, error) {
	owners, err := replicaSetsOf(ctx, env, d)
	if err != nil {
		return nil, err
	}
	return ControlledPods(ctx, env, d.Spec.Selector, owners...)
}

// replicaSetsOf are the UIDs of the Deployment's ReplicaSets.
func replicaSetsOf(ctx context.Context, env *engine.Env, d *appsv1.Deployment) ([]types.UID, error) {
	sets := &appsv1.ReplicaSetList{}
	if err := env.Client.List(ctx, sets, client.InNamespace(d.Namespace)); err != nil {
		return nil, fmt.Errorf("listing ReplicaSets: %w", err)
	}
	var owners []types.UID
	for _, rs := range sets.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
			owners = append(owners, rs.UID)
		}
	}
	return owners, nil
}

// sameContainers: a pod's containers run what the template says.
func sameContainers(pod, template []corev1.Container) bool {
	return slices.EqualFunc(pod, template, func(a, b corev1.Container) bool {
		return a.Name == b.Name && a.Image == b.Image && slices.Equal(a.Command, b.Command) && slices.Equal(a.Args, b.Args)
	})
}
