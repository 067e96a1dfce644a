package leftover

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Linger is the leftover's second container on one node.
type Linger struct {
	Client    kubernetes.Interface
	Namespace string
	Node      string
	// Interval between two looks at the node's pods: level-triggered, so a
	// missed change is seen at the next one.
	Interval time.Duration
	// TearDown undoes the node's setup (the address off lo, the NOTRACK
	// table dropped), as revert's teardown Job does; idempotent.
	TearDown func() error
}

// Run looks at the node's pods every Interval until none resolves at the
// address, then tears the node down, takes it off the ConfigMap and, as the
// last node, deletes the ClusterRole that owns the leftover; then it idles
// until its pod is deleted. Failed rounds are logged and retried.
func (l Linger) Run(ctx context.Context) error {
	for {
		done, err := l.round(ctx)
		switch {
		case err != nil:
			klog.ErrorS(err, "Leftover round failed, retrying", "node", l.Node)
		case done:
			klog.InfoS("Leftover done on this node, idling until deleted", "node", l.Node)
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(l.Interval):
		}
	}
}

// round is one look; done: nothing is left to do on the node.
func (l Linger) round(ctx context.Context) (done bool, err error) {
	cms := l.Client.CoreV1().ConfigMaps(l.Namespace)
	cm, err := cms.Get(ctx, Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Being deleted, or install's cache took the address over: not
		// ours to touch any more.
		return true, nil
	}
	if err != nil {
		return false, err
	}
	windows, err := Windows(cm.Data)
	if err != nil {
		return false, err
	}
	pods, err := l.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", l.Node).String()})
	if err != nil {
		return false, fmt.Errorf("listing the pods on node %s: %w", l.Node, err)
	}
	action, stranded := Decide(windows, l.Node, pods.Items)
	switch action {
	case Serve:
		klog.V(2).InfoS("Pods still resolve at the node-local address", "node", l.Node, "count", len(stranded), "pods", stranded)
		return false, nil
	case Yield:
		klog.InfoS("A node-local cache runs on the node again: leaving the address to it", "node", l.Node)
		return false, nil
	}
	if err := l.TearDown(); err != nil {
		return false, err
	}
	left, err := l.forget(ctx)
	if err != nil || left > 0 {
		return err == nil, err
	}
	err = l.Client.RbacV1().ClusterRoles().Delete(ctx, ClusterRole, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting ClusterRole %s: %w", ClusterRole, err)
	}
	klog.InfoS("Last node done: deleted the leftover's ClusterRole, the garbage collector removes the rest", "node", l.Node, "clusterRole", ClusterRole)
	return true, nil
}

// forget takes the node off the ConfigMap; left is how many nodes still
// linger (none when the ConfigMap is gone).
func (l Linger) forget(ctx context.Context) (left int, err error) {
	cms := l.Client.CoreV1().ConfigMaps(l.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := cm.Data[l.Node]; ok {
			delete(cm.Data, l.Node)
			if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				return err
			}
			klog.InfoS("Node torn down and taken off the leftover", "node", l.Node, "configMap", Name)
		}
		windows, err := Windows(cm.Data)
		left = len(windows)
		return err
	})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	return left, err
}
