package tunnelsync

import (
	"context"
	"fmt"
	"strconv"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// kubeDNSTopologyController names the keeper in metrics and logs.
const kubeDNSTopologyController = "kube-dns-topology"

// likelyRemover is what the restore's log line and event say of who
// removed the annotation: a watch does not tell who wrote, and kubeadm
// upgrade is the writer known to do it.
const likelyRemover = "unknown, e.g. kubeadm upgrade's CoreDNS addon (it updates kube-dns from its template)"

// kubeDNSTopologyKeeper keeps the topology annotation on the kube-dns
// Service (Config.KubeDNSTopology): whenever another writer drops or
// changes it, it is patched back, and nothing else of the Service is touched.
type kubeDNSTopologyKeeper struct {
	value string
	// services reads the one kube-dns Service from a cache of its own.
	services client.Reader
	client   client.Client
	recorder events.EventRecorder
}

// setupKubeDNSTopologyKeeper adds the keeper to mgr, watching only the
// kube-dns Service of namespace; it patches only while lead leads, and
// looks at kube-dns at the start of each term.
func setupKubeDNSTopologyKeeper(mgr manager.Manager, lead *leadership, namespace, value string) error {
	services, err := namedCache(mgr, namespace, &corev1.Service{}, tunnelnodes.KubeDNSService)
	if err != nil {
		return err
	}
	k := &kubeDNSTopologyKeeper{value: value, services: services, client: mgr.GetClient(), recorder: mgr.GetEventRecorder(ControllerName)}
	return ctrl.NewControllerManagedBy(mgr).
		Named(kubeDNSTopologyController).
		WatchesRawSource(source.Kind(services, &corev1.Service{}, &handler.TypedEnqueueRequestForObject[*corev1.Service]{})).
		WatchesRawSource(lead.queueAtStart(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: tunnelnodes.KubeDNSService}})).
		Complete(lead.gate(k))
}

// topologyDrift is what the annotations hold instead of the topology
// annotation with value want, as the restore reports it: "missing", or the
// other value quoted; "" when they hold want.
func topologyDrift(annotations map[string]string, want string) string {
	got, ok := annotations[tunnelnodes.TopologyKeysAnnotation]
	switch {
	case !ok:
		return "missing"
	case got != want:
		return strconv.Quote(got)
	}
	return ""
}

// Reconcile implements reconcile.Reconciler.
func (k *kubeDNSTopologyKeeper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &corev1.Service{}
	if err := k.services.Get(ctx, req.NamespacedName, svc); err != nil {
		// A Service created again comes back as a create event.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	drift := topologyDrift(svc.Annotations, k.value)
	if drift == "" {
		return reconcile.Result{}, nil
	}
	// A merge patch of the one annotation, on the resourceVersion read: a
	// write since (the cache lagging behind our own restore, or another
	// writer) is a conflict, and its watch event brings the key back.
	read := svc.DeepCopy()
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[tunnelnodes.TopologyKeysAnnotation] = k.value
	err := k.client.Patch(ctx, svc, client.MergeFromWithOptions(read, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		conflictsTotal.WithLabelValues(tunnelnodes.KubeDNSService).Inc()
		log.FromContext(ctx).V(1).Info("kube-dns changed since it was read; looking again on its next event", "service", req.String())
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("restoring %s on Service %s: %w", tunnelnodes.TopologyKeysAnnotation, req, err)
	}
	kubeDNSTopologyRestoresTotal.Inc()
	log.FromContext(ctx).Info("Restored the topology annotation another writer removed or changed on the kube-dns Service",
		"service", req.String(), "annotation", tunnelnodes.TopologyKeysAnnotation, "value", k.value, "before", drift, "removedBy", likelyRemover)
	k.recorder.Eventf(svc, nil, corev1.EventTypeWarning, "TopologyAnnotationRestored", "Restore",
		"%s set back to %q (before: %s); removed or changed by: %s", tunnelnodes.TopologyKeysAnnotation, k.value, drift, likelyRemover)
	return reconcile.Result{}, nil
}
