package harness

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/kubewait"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// PlayRolloutControllers stands in for what envtest does not run — the
// DaemonSet, Deployment/ReplicaSet, EndpointSlice and garbage collector
// controllers and the kubelets — for the workloads in namespace, until stop
// is called:
//   - a DaemonSet gets a pod on every node its nodeSelector matches,
//     labelled with its template generation; a template change replaces
//     them, with maxSurge a new pod beside the old one, which goes once the
//     new one has been Ready for minReadySeconds;
//   - a Deployment gets a ReplicaSet and as many pods as its replicas, on
//     Ready nodes (a template change replaces them), labelled
//     pod-template-hash like the real controller's;
//   - an owned pod without a node is bound to the first Ready node its
//     nodeSelector matches;
//   - an owned pod on a Ready node (condition Ready True) runs and is Ready
//     with an IP (IPv6 on an Options.IPv6Only control plane), and its
//     graceful deletion is confirmed; on any other node
//     it stays as it is, as with a kubelet cut off;
//   - each Service with a selector gets an EndpointSlice of the pods it
//     selects, ready as they are; pods whose controller is gone are deleted;
//   - the DaemonSets' and Deployments' status says what their pods do.
//
// Tests that need a Ready node create one (Node.Ready).
func (cp *ControlPlane) PlayRolloutControllers(namespace string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	p := &player{c: cp.UnthrottledClient(), ns: namespace, ipv6: cp.ipv6Only}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			p.round(ctx)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

type player struct {
	c    kubernetes.Interface
	ns   string
	ipv6 bool // the pods' IPs and the EndpointSlices are IPv6
}

// round plays one pass of every controller; errors are retried next round.
func (p *player) round(ctx context.Context) {
	nodes, err := p.c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	ready := map[string]bool{}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready[n.Name] = true
			}
		}
	}
	pods, err := p.c.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	owners := map[types.UID]bool{}
	dss, err := p.c.AppsV1().DaemonSets(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range dss.Items {
		owners[dss.Items[i].UID] = true
		p.daemonSet(ctx, &dss.Items[i], nodes.Items, pods.Items, ready)
	}
	deps, err := p.c.AppsV1().Deployments(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range deps.Items {
		if rs := p.deployment(ctx, &deps.Items[i], pods.Items, ready); rs != nil {
			owners[rs.UID] = true
		}
	}
	for _, pod := range pods.Items {
		if ref := metav1.GetControllerOf(&pod); ref != nil && (ref.Kind == "DaemonSet" || ref.Kind == "ReplicaSet") && !owners[ref.UID] {
			p.deletePod(ctx, pod.Name)
		}
	}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName == "" {
			p.schedule(ctx, &pod, nodes.Items, ready)
		}
		p.kubelet(ctx, pod, ready[pod.Spec.NodeName])
	}
	p.endpointSlices(ctx)
}

func (p *player) daemonSet(ctx context.Context, ds *appsv1.DaemonSet, nodes []corev1.Node, pods []corev1.Pod, ready map[string]bool) {
	gen := ds.Annotations["deprecated.daemonset.template.generation"]
	selector := labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector)
	var status appsv1.DaemonSetStatus
	for _, n := range nodes {
		if !selector.Matches(labels.Set(n.Labels)) {
			continue
		}
		status.DesiredNumberScheduled++
		onNode := func(current bool) int {
			return slices.IndexFunc(pods, func(pod corev1.Pod) bool {
				return ownedBy(&pod, ds.UID) && pod.Spec.NodeName == n.Name && (pod.Labels["pod-template-generation"] == gen) == current
			})
		}
		cur, old := onNode(true), onNode(false)
		if old >= 0 && (!surges(ds) || cur >= 0 && available(&pods[cur], ds.Spec.MinReadySeconds)) {
			p.deletePod(ctx, pods[old].Name) // rolling update: the old pod goes, as the controller's
		}
		if cur < 0 {
			_ = p.createPod(ctx, ds.Name+"-"+n.Name+"-"+gen, n.Name, ds.Spec.Template, map[string]string{"pod-template-generation": gen},
				metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet")))
			continue
		}
		status.CurrentNumberScheduled++
		status.UpdatedNumberScheduled++
		if ready[n.Name] && kubewait.PodReady(&pods[cur]) {
			status.NumberReady++
			if available(&pods[cur], ds.Spec.MinReadySeconds) {
				status.NumberAvailable++
			}
		}
	}
	status.NumberUnavailable = status.DesiredNumberScheduled - status.NumberAvailable
	status.ObservedGeneration = ds.Generation
	if !equality.Semantic.DeepEqual(ds.Status, status) {
		ds.Status = status
		_, _ = p.c.AppsV1().DaemonSets(p.ns).UpdateStatus(ctx, ds, metav1.UpdateOptions{})
	}
}

// surges: the DaemonSet's rolling update makes the new pod beside the old
// one (maxSurge) rather than deleting the old one first. Every node surges
// at once here, whatever maxSurge says.
func surges(ds *appsv1.DaemonSet) bool {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	return ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType && ru != nil && ru.MaxSurge != nil &&
		ru.MaxSurge.String() != "0" && ru.MaxSurge.String() != "0%"
}

// available: Ready for minReadySeconds, as the DaemonSet controller counts it.
func available(pod *corev1.Pod, minReadySeconds int32) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return time.Since(c.LastTransitionTime.Time) >= time.Duration(minReadySeconds)*time.Second
		}
	}
	return false
}

// deployment keeps one ReplicaSet per Deployment with the Deployment's
// replicas as pods on Ready nodes; a template change replaces its pods.
func (p *player) deployment(ctx context.Context, d *appsv1.Deployment, pods []corev1.Pod, ready map[string]bool) *appsv1.ReplicaSet {
	rsName := d.Name + "-play"
	rs, err := p.c.AppsV1().ReplicaSets(p.ns).Get(ctx, rsName, metav1.GetOptions{})
	if ref := metav1.GetControllerOf(rs); err == nil && (ref == nil || ref.UID != d.UID) {
		// A Deployment deleted and made again: the garbage collector's part
		// for its old ReplicaSet, whose pods then go as orphans.
		_ = p.c.AppsV1().ReplicaSets(p.ns).Delete(ctx, rsName, metav1.DeleteOptions{})
		err = fmt.Errorf("ReplicaSet %s was another Deployment's", rsName)
	}
	if err != nil {
		rs = &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: rsName, Namespace: p.ns, Labels: d.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
			Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template},
		}
		if rs, err = p.c.AppsV1().ReplicaSets(p.ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			return nil
		}
	}
	// A template change (an image swapped in place) replaces the pods:
	// those running other containers are deleted and made again.
	if !equality.Semantic.DeepEqual(rs.Spec.Template, d.Spec.Template) {
		rs.Spec.Template = d.Spec.Template
		if rs, err = p.c.AppsV1().ReplicaSets(p.ns).Update(ctx, rs, metav1.UpdateOptions{}); err != nil {
			return nil
		}
	}
	want := 1
	if d.Spec.Replicas != nil {
		want = int(*d.Spec.Replicas)
	}
	var nodes []string
	for n := range ready {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	available := 0
	for i := range max(want, len(pods)) {
		name := fmt.Sprintf("%s-%d", rsName, i)
		exists := slices.ContainsFunc(pods, func(pod corev1.Pod) bool { return pod.Name == name && ownedBy(&pod, rs.UID) })
		if exists && !slices.ContainsFunc(pods, func(pod corev1.Pod) bool { return pod.Name == name && sameImages(pod.Spec, d.Spec.Template.Spec) }) {
			p.deletePod(ctx, name)
			continue
		}
		switch {
		case i >= want && exists:
			p.deletePod(ctx, name)
		case i < want && !exists && len(nodes) > 0:
			if p.createPod(ctx, name, nodes[i%len(nodes)], d.Spec.Template, map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: "play"},
				metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))) {
				available++ // on a Ready node: running by the end of this round
			}
		case i < want && exists:
			available++
		}
	}
	status := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: int32(available), UpdatedReplicas: int32(available),
		ReadyReplicas: int32(available), AvailableReplicas: int32(available), UnavailableReplicas: int32(want - available)}
	if d.Status.ObservedGeneration != status.ObservedGeneration || d.Status.AvailableReplicas != status.AvailableReplicas ||
		d.Status.Replicas != status.Replicas || d.Status.UnavailableReplicas != status.UnavailableReplicas {
		d.Status = status
		_, _ = p.c.AppsV1().Deployments(p.ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	}
	return rs
}

// sameImages: a pod runs the template's containers (images, commands, args).
func sameImages(pod, template corev1.PodSpec) bool {
	return slices.EqualFunc(pod.Containers, template.Containers, func(a, b corev1.Container) bool {
		return a.Image == b.Image && slices.Equal(a.Command, b.Command) && slices.Equal(a.Args, b.Args)
	})
}

func ownedBy(pod *corev1.Pod, uid types.UID) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.UID == uid
}

func (p *player) createPod(ctx context.Context, name, node string, tmpl corev1.PodTemplateSpec, extraLabels map[string]string, owner *metav1.OwnerReference) bool {
	pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	pod.Name, pod.Namespace, pod.OwnerReferences = name, p.ns, []metav1.OwnerReference{*owner}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	for k, v := range extraLabels {
		pod.Labels[k] = v
	}
	pod.Spec.NodeName = node
	_, err := p.c.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
	return err == nil
}

// deletePod deletes at once: there is no kubelet to confirm a graceful deletion.
func (p *player) deletePod(ctx context.Context, name string) {
	_ = p.c.CoreV1().Pods(p.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
}

// schedule binds a pod that something owns (a test's own bare pods are
// left alone) to the first Ready node its nodeSelector matches.
func (p *player) schedule(ctx context.Context, pod *corev1.Pod, nodes []corev1.Node, ready map[string]bool) {
	if len(pod.OwnerReferences) == 0 {
		return
	}
	selector := labels.SelectorFromSet(pod.Spec.NodeSelector)
	for _, n := range nodes {
		if ready[n.Name] && selector.Matches(labels.Set(n.Labels)) {
			binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: p.ns, UID: pod.UID},
				Target: corev1.ObjectReference{Kind: "Node", Name: n.Name}}
			if p.c.CoreV1().Pods(p.ns).Bind(ctx, binding, metav1.CreateOptions{}) == nil {
				pod.Spec.NodeName = n.Name
			}
			return
		}
	}
}

// kubelet runs a pod that something owns on a Ready node: Running, Ready,
// with an IP derived from its name; a graceful deletion is confirmed.
func (p *player) kubelet(ctx context.Context, pod corev1.Pod, nodeReady bool) {
	if !nodeReady || pod.Spec.NodeName == "" || len(pod.OwnerReferences) == 0 {
		return
	}
	if pod.DeletionTimestamp != nil {
		p.deletePod(ctx, pod.Name)
		return
	}
	if pod.Status.Phase == corev1.PodRunning {
		return
	}
	h := fnv.New32a()
	h.Write([]byte(pod.Name))
	sum := h.Sum32()
	ip := fmt.Sprintf("10.244.%d.%d", sum>>8&0xff, sum&0x7f+2)
	if p.ipv6 {
		a := netip.MustParseAddr("2001:db8:244::").As16()
		binary.BigEndian.PutUint32(a[12:], sum)
		ip = netip.AddrFrom16(a).String()
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	_, _ = p.c.CoreV1().Pods(p.ns).UpdateStatus(ctx, &pod, metav1.UpdateOptions{})
}

// endpointSlices writes one EndpointSlice per Service with a selector, as
// the EndpointSlice controller would.
func (p *player) endpointSlices(ctx context.Context) {
	svcs, err := p.c.CoreV1().Services(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, svc := range svcs.Items {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		pods, err := p.c.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
		if err != nil {
			continue
		}
		want := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-play", Namespace: p.ns,
				Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "harness"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{},
		}
		if p.ipv6 {
			want.AddressType = discoveryv1.AddressTypeIPv6
		}
		for _, sp := range svc.Spec.Ports {
			want.Ports = append(want.Ports, discoveryv1.EndpointPort{Name: new(sp.Name), Protocol: new(sp.Protocol), Port: new(int32(sp.TargetPort.IntValue()))})
		}
		for _, pod := range pods.Items {
			if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
				continue
			}
			ready := pod.Status.Phase == corev1.PodRunning
			want.Endpoints = append(want.Endpoints, discoveryv1.Endpoint{Addresses: []string{pod.Status.PodIP},
				Conditions: discoveryv1.EndpointConditions{Ready: new(ready)}, NodeName: new(pod.Spec.NodeName),
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.ns, Name: pod.Name, UID: pod.UID}})
		}
		slices.SortFunc(want.Endpoints, func(a, b discoveryv1.Endpoint) int { return strings.Compare(a.Addresses[0], b.Addresses[0]) })
		eps := p.c.DiscoveryV1().EndpointSlices(p.ns)
		cur, err := eps.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			_, _ = eps.Create(ctx, want, metav1.CreateOptions{})
			continue
		}
		if !equality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) || !equality.Semantic.DeepEqual(cur.Ports, want.Ports) {
			cur.Endpoints, cur.Ports = want.Endpoints, want.Ports
			_, _ = eps.Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
}
