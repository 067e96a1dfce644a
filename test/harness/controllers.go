package harness

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlayRolloutControllers stands in for the DaemonSet and Deployment
// controllers, which envtest does not run: until stop is called it writes
// the status they would write once the pods are up — 3 nodes for every
// DaemonSet in namespace, all replicas for every Deployment there.
func (cp *ControlPlane) PlayRolloutControllers(namespace string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	apps := cp.Client.AppsV1()
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if dss, err := apps.DaemonSets(namespace).List(ctx, metav1.ListOptions{}); err == nil {
				for _, ds := range dss.Items {
					if ds.Status.ObservedGeneration < ds.Generation {
						ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3,
							UpdatedNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3}
						_, _ = apps.DaemonSets(namespace).UpdateStatus(ctx, &ds, metav1.UpdateOptions{})
					}
				}
			}
			if ds, err := apps.Deployments(namespace).List(ctx, metav1.ListOptions{}); err == nil {
				for _, d := range ds.Items {
					want := int32(1)
					if d.Spec.Replicas != nil {
						want = *d.Spec.Replicas
					}
					if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas != want {
						d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: want,
							UpdatedReplicas: want, ReadyReplicas: want, AvailableReplicas: want}
						_, _ = apps.Deployments(namespace).UpdateStatus(ctx, &d, metav1.UpdateOptions{})
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}
