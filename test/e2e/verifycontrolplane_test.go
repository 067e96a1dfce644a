package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStatusVerifyDNSFromControlPlaneCannotRun: status
// --verify-dns-from-control-plane creates a Job per control-plane node in
// kube-apiserver's DNS view, with a ServiceAccount that may only list nodes
// and get the tunnel Service; a pod that cannot start (its image cannot be
// pulled) is reported for its node at once, not after --timeout, and the
// Jobs and RBAC are gone afterwards. envtest runs no Job controller or
// kubelet: the test creates the Job's pod and its waiting status as they would.
func TestStatusVerifyDNSFromControlPlaneCannotRun(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "192.168.0.10", Ready: true,
		Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}})
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Ready: true, Edge: true})

	p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), "status", "--kubeconfig", cp.Kubeconfig,
		"--verify-dns-from-control-plane", "--sync-image", "docker.io/yurtdns/tunnel-nodes-sync:missing", "--timeout", "2m")
	var jobName string
	harness.Eventually(t, 20*time.Second, func() error {
		jobs, err := cp.Client.BatchV1().Jobs(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "yurtdns.io/job=verify-dns"})
		if err != nil || len(jobs.Items) != 1 {
			return fmt.Errorf("verify Jobs: %v %d", err, len(jobs.Items))
		}
		j := jobs.Items[0]
		s := j.Spec.Template.Spec
		if !s.HostNetwork || s.DNSPolicy != corev1.DNSClusterFirstWithHostNet || s.ServiceAccountName != "yurtdns-verify-dns" ||
			s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != "master-1" ||
			s.Containers[0].Image != "docker.io/yurtdns/tunnel-nodes-sync:missing" || strings.Join(s.Containers[0].Args, " ") != "verify-node-dns --edge-node-selector openyurt.io/is-edge-worker=true --profile yurt-tunnel" {
			t.Fatalf("verify Job spec: %+v", s)
		}
		jobName = j.Name
		return nil
	})
	// The Jobs' ServiceAccount may do what the check needs and nothing more.
	for _, c := range []struct {
		attrs authorizationv1.ResourceAttributes
		allow bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "nodes"}, true},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "services", Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName}, true},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Name: "master-1"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "services", Namespace: tunnelnodes.Namespace, Name: "kube-dns"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "configmaps", Namespace: tunnelnodes.Namespace}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: tunnelnodes.Namespace}, false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &c.attrs,
			User: "system:serviceaccount:kube-system:yurtdns-verify-dns", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}}
		res, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Allowed != c.allow {
			t.Errorf("the check's ServiceAccount may %+v: %v, want %v", c.attrs, res.Status.Allowed, c.allow)
		}
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: jobName + "-abcde", Namespace: tunnelnodes.Namespace,
		Labels: map[string]string{"batch.kubernetes.io/job-name": jobName}},
		Spec: corev1.PodSpec{NodeName: "master-1", Containers: []corev1.Container{{Name: "verify-dns", Image: "docker.io/yurtdns/tunnel-nodes-sync:missing"}}}}
	created, err := cp.Client.CoreV1().Pods(tunnelnodes.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "verify-dns",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}}
	if _, err := cp.Client.CoreV1().Pods(tunnelnodes.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = p.Wait(t, time.Minute)
	out := p.Output()
	if err == nil || !strings.Contains(out, "From control-plane node master-1") || !strings.Contains(out, "CHECK FAILED: Job "+jobName+" failed: pod "+pod.Name+" cannot start: ErrImagePull: not found") ||
		!strings.Contains(out, "the check could not run on 1 control-plane node(s)") {
		t.Errorf("want the pod's failure reported for master-1 and status failing, got %v:\n%s", err, out)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("reported after %s, not as soon as it showed", waited)
	}
	jobs, _ := cp.Client.BatchV1().Jobs(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "yurtdns.io/job=verify-dns"})
	sas, _ := cp.Client.CoreV1().ServiceAccounts(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "yurtdns.io/job=verify-dns"})
	crs, _ := cp.Client.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: "yurtdns.io/job=verify-dns"})
	if len(jobs.Items)+len(sas.Items)+len(crs.Items) != 0 {
		t.Errorf("left behind: %d Jobs, %d ServiceAccounts, %d ClusterRoles", len(jobs.Items), len(sas.Items), len(crs.Items))
	}
}
