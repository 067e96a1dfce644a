package kube

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A DNS pod cannot simply be deleted from behind a Service. A query reuses
// the conntrack entry of an earlier query from the same source port, and
// that entry still points at the pod the earlier query went to: kube-proxy
// deletes a UDP Service's entries only once their endpoint stops serving,
// which for a deleted pod is after its container exited. Measured on the
// real cluster: between the end of CoreDNS's lameduck (its socket closed,
// "connection refused") and kube-proxy's delete, 1.5 to 3.5 s per pod, 25 of
// 7039 single-try queries failed, each asked at such a moment. Deleting
// the endpoint while the pod still runs has the opposite race: the delete
// can catch a reply on its way back, which then misses the reverse NAT.
//
// So pods leave a Service in order: a drain slice lists them as terminating
// but serving (kube-proxy sends them no new flow, keeps their entries), the
// Service's selector stops selecting them, no query reaches them for
// quietFor, the drain slice goes (kube-proxy deletes their entries with no
// reply on its way), and only then are they deleted, answering through
// their own lameduck meanwhile.
type drain struct {
	service string
	slice   string // the EndpointSlice that keeps the pods serving while they drain
}

// quietFor is how long no query may reach the draining pods before their
// conntrack entries are deleted: several kube-proxy syncs (minSyncPeriod
// 1 s), so a node that still routes to them is seen doing so.
var quietFor = 3 * time.Second

// quietLimit bounds that wait (see waitQuiet).
var quietLimit = 30 * time.Second

// narrowedSelectorAnnotation lists, on a Service, the selector keys a drain
// added; restoreSelector takes exactly them out again.
const narrowedSelectorAnnotation = "yurtdns.io/drain-added-selector-keys"

// start lists pods in the drain slice as terminating and serving.
func (d drain) start(ctx context.Context, env *engine.Env, pods []corev1.Pod) error {
	yes, no := true, false
	slice, err := serviceSlice(ctx, env, d.service, d.slice, pods, discoveryv1.EndpointConditions{Ready: &no, Serving: &yes, Terminating: &yes})
	if err != nil {
		return err
	}
	return applySlice(ctx, env, slice)
}

// finish waits until no other EndpointSlice lists the pods and no query
// has reached them for quietFor, then deletes the drain slice. The note
// says when they did not get quiet.
func (d drain) finish(ctx context.Context, env *engine.Env, pods []corev1.Pod) (note string, err error) {
	ips := podIPs(pods)
	if err := kubewait.For(ctx, env.Options.Timeout, fmt.Sprintf("pods %v still selected by Service %s", ips, d.service),
		d.selectedElsewhere(env, ips)); err != nil {
		return "", err
	}
	if note, err = waitQuiet(ctx, env, pods); err != nil {
		return "", err
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: d.slice, Namespace: tunnelnodes.Namespace}}
	if err := client.IgnoreNotFound(env.Client.Delete(ctx, slice)); err != nil {
		return "", fmt.Errorf("deleting EndpointSlice %s: %w", d.slice, err)
	}
	return note, nil
}

// selectedElsewhere is done when no EndpointSlice of the Service but the
// drain slice lists any of ips.
func (d drain) selectedElsewhere(env *engine.Env, ips []string) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		eps := &discoveryv1.EndpointSliceList{}
		if err := env.Client.List(ctx, eps, client.InNamespace(tunnelnodes.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: d.service}); err != nil {
			return false, "", fmt.Errorf("listing EndpointSlices of Service %s: %w", d.service, err)
		}
		for _, s := range eps.Items {
			if s.Name == d.slice {
				continue
			}
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					if slices.Contains(ips, a) {
						return false, fmt.Sprintf("EndpointSlice %s still lists %s", s.Name, a), nil
					}
				}
			}
		}
		return true, "", nil
	}
}

// waitQuiet waits until the pods' CoreDNS request counters (read through
// the apiserver's pod proxy from their "metrics" port) stay the same for
// quietFor, for at most quietLimit: clients that keep reusing the source
// ports of earlier queries keep reaching the pods through those queries'
// conntrack entries, as on a busy cluster they always do, and only
// kube-proxy's delete ends that. The note says when it did not get quiet.
func waitQuiet(ctx context.Context, env *engine.Env, pods []corev1.Pod) (note string, err error) {
	started := time.Now()
	first, last := -1.0, -1.0
	stillSince := started
	for {
		var total float64
		for i := range pods {
			n, err := dnsRequests(ctx, env, &pods[i])
			if err != nil {
				return fmt.Sprintf("%v: waited %s for kube-proxy instead", err, kubeProxyGrace), sleep(ctx, kubeProxyGrace)
			}
			total += n
		}
		now := time.Now()
		if first < 0 {
			first = total
		}
		if total != last {
			last, stillSince = total, now
		}
		if now.Sub(stillSince) >= quietFor {
			return "", nil
		}
		if elapsed := now.Sub(started); elapsed >= quietLimit {
			return fmt.Sprintf("%.1f queries/s still reached %v after %s, through conntrack entries of earlier queries from the same source ports; kube-proxy deleted those entries as the pods left",
				(total-first)/elapsed.Seconds(), podIPs(pods), elapsed.Round(time.Second)), nil
		}
		if err := sleep(ctx, kubewait.PollInterval); err != nil {
			return "", err
		}
	}
}

// dnsRequests is coredns_dns_requests_total summed over its series.
func dnsRequests(ctx context.Context, env *engine.Env, pod *corev1.Pod) (float64, error) {
	port := ""
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "metrics" {
				port = fmt.Sprint(p.ContainerPort)
			}
		}
	}
	if port == "" || env.Clientset == nil {
		return 0, fmt.Errorf("pod %s: no metrics port to read", pod.Name)
	}
	body, err := env.Clientset.CoreV1().Pods(pod.Namespace).ProxyGet("http", pod.Name, port, "metrics", nil).DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading metrics of pod %s: %w", pod.Name, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("metrics of pod %s: %w", pod.Name, err)
	}
	var n float64
	if f := families["coredns_dns_requests_total"]; f != nil {
		for _, m := range f.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n, nil
}

// HandOff moves the Service's traffic off leaving to the pods that carry
// keep, runs remove (which deletes the leaving pods or their controller),
// waits for the pods to be gone, and gives the Service its selector back.
// The note says when the pods did not get quiet.
func HandOff(ctx context.Context, env *engine.Env, service string, leaving []corev1.Pod, keep map[string]string, remove func() error) (note string, err error) {
	leaving = slices.DeleteFunc(leaving, func(p corev1.Pod) bool { return p.Status.PodIP == "" })
	if len(leaving) > 0 {
		d := drain{service: service, slice: drainSliceName(service)}
		if err := d.start(ctx, env, leaving); err != nil {
			return "", err
		}
		if err := narrowSelector(ctx, env, service, keep); err != nil {
			return "", err
		}
		if note, err = d.finish(ctx, env, leaving); err != nil {
			return "", err
		}
	}
	if err := remove(); err != nil {
		return "", err
	}
	if err := kubewait.For(ctx, env.Options.Timeout, fmt.Sprintf("pods %v not gone", podIPs(leaving)), PodsGone(env, leaving)); err != nil {
		return "", err
	}
	return note, EndHandOff(ctx, env, service)
}

// PodsGone is done when none of the pods exists any more, but for those on
// NotReady nodes: no kubelet confirms their deletion there (an edge node
// cut off from the cloud is normal in OpenYurt).
func PodsGone(env *engine.Env, pods []corev1.Pod) kubewait.Condition {
	return func(ctx context.Context) (bool, string, error) {
		_, notReady, err := ReadyNodes(ctx, env)
		if err != nil {
			return false, "", err
		}
		for _, p := range pods {
			if slices.Contains(notReady, p.Spec.NodeName) {
				continue
			}
			cur := &corev1.Pod{}
			err := env.Client.Get(ctx, Key(p.Name), cur)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return false, "", fmt.Errorf("reading pod %s: %w", p.Name, err)
			case cur.UID == p.UID:
				return false, "pod " + p.Name + " terminating", nil
			}
		}
		return true, "", nil
	}
}

// narrowSelector makes the Service select only pods that also carry keep,
// recording the keys it added.
func narrowSelector(ctx context.Context, env *engine.Env, service string, keep map[string]string) error {
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, Key(service), svc); err != nil {
		return fmt.Errorf("reading Service %s: %w", service, err)
	}
	if len(svc.Spec.Selector) == 0 {
		return fmt.Errorf("Service %s selects no pods: nothing to hand off", service)
	}
	patch := client.MergeFrom(svc.DeepCopy())
	added := strings.FieldsFunc(svc.Annotations[narrowedSelectorAnnotation], func(r rune) bool { return r == ',' })
	for k, v := range keep {
		if _, ok := svc.Spec.Selector[k]; !ok {
			added = append(added, k)
		}
		svc.Spec.Selector[k] = v
	}
	slices.Sort(added)
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[narrowedSelectorAnnotation] = strings.Join(slices.Compact(added), ",")
	if err := env.Client.Patch(ctx, svc, patch); err != nil {
		return fmt.Errorf("narrowing the selector of Service %s: %w", service, err)
	}
	return nil
}

// EndHandOff takes the keys narrowSelector added out of the Service's
// selector, then deletes the drain slice: the end of every hand-off, and
// the first thing after one an interrupted run left (the pods it listed
// are selected again before the slice that kept them serving goes).
func EndHandOff(ctx context.Context, env *engine.Env, service string) error {
	svc := &corev1.Service{}
	switch err := env.Client.Get(ctx, Key(service), svc); {
	case apierrors.IsNotFound(err): // no selector to restore; the step's own wait reports the missing Service
	case err != nil:
		return fmt.Errorf("reading Service %s: %w", service, err)
	}
	if added, ok := svc.Annotations[narrowedSelectorAnnotation]; ok {
		if err := restoreSelector(ctx, env, svc, added); err != nil {
			return err
		}
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: drainSliceName(service), Namespace: tunnelnodes.Namespace}}
	if err := client.IgnoreNotFound(env.Client.Delete(ctx, slice)); err != nil {
		return fmt.Errorf("deleting EndpointSlice %s: %w", slice.Name, err)
	}
	return nil
}

func restoreSelector(ctx context.Context, env *engine.Env, svc *corev1.Service, added string) error {
	patch := client.MergeFrom(svc.DeepCopy())
	for _, k := range strings.Split(added, ",") {
		delete(svc.Spec.Selector, k)
	}
	delete(svc.Annotations, narrowedSelectorAnnotation)
	if len(svc.Annotations) == 0 {
		svc.Annotations = nil
	}
	if err := env.Client.Patch(ctx, svc, patch); err != nil {
		return fmt.Errorf("restoring the selector of Service %s: %w", svc.Name, err)
	}
	return nil
}

// serviceSlice lists pods as endpoints of every port of the Service, with
// the given conditions, in an EndpointSlice the EndpointSlice controller
// leaves alone.
func serviceSlice(ctx context.Context, env *engine.Env, service, name string, pods []corev1.Pod, cond discoveryv1.EndpointConditions) (*discoveryv1.EndpointSlice, error) {
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, Key(service), svc); err != nil {
		return nil, fmt.Errorf("reading Service %s: %w", service, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tunnelnodes.Namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: handoverManagedBy}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, p := range pods {
		if p.Status.PodIP == "" {
			return nil, fmt.Errorf("pod %s has no IP", p.Name)
		}
		if strings.Contains(p.Status.PodIP, ":") {
			slice.AddressType = discoveryv1.AddressTypeIPv6
		}
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.Status.PodIP},
			Conditions: cond,
			NodeName:   &pods[i].Spec.NodeName,
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		})
	}
	if len(pods) == 0 {
		return slice, nil
	}
	for _, sp := range svc.Spec.Ports {
		target, err := targetPort(sp, &pods[0])
		if err != nil {
			return nil, fmt.Errorf("Service %s: %w", service, err)
		}
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: &sp.Name, Protocol: &sp.Protocol, Port: &target})
	}
	return slice, nil
}

// applySlice creates the slice, or replaces one an earlier call or an
// interrupted run made.
func applySlice(ctx context.Context, env *engine.Env, slice *discoveryv1.EndpointSlice) error {
	err := env.Client.Create(ctx, slice)
	if apierrors.IsAlreadyExists(err) {
		existing := &discoveryv1.EndpointSlice{}
		if err = env.Client.Get(ctx, Key(slice.Name), existing); err == nil {
			slice.ResourceVersion = existing.ResourceVersion
			err = env.Client.Update(ctx, slice)
		}
	}
	if err != nil {
		return fmt.Errorf("writing EndpointSlice %s: %w", slice.Name, err)
	}
	return nil
}

func drainSliceName(service string) string { return service + "-drain" }

func podIPs(pods []corev1.Pod) []string {
	var ips []string
	for _, p := range pods {
		ips = append(ips, p.Status.PodIP)
	}
	return ips
}
