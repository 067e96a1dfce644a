package steps

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// createMirrorPod creates the mirror pod of a stacked kubeadm control-plane
// component on node, Ready, as its kubelet would.
func createMirrorPod(t *testing.T, c kubernetes.Interface, component, node string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: component + "-" + node, Namespace: tunnelnodes.Namespace,
			Labels: map[string]string{"component": component, "tier": "control-plane"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: component, Image: "registry.k8s.io/" + component + ":v1.37.1"}}},
	}
	if _, err := c.CoreV1().Pods(tunnelnodes.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPodReady(t, c, pod.Name, true)
}

// setPodReady plays the kubelet: the pod's Ready condition as its
// readiness probe (kube-apiserver's or etcd's /readyz) has it.
func setPodReady(t *testing.T, c kubernetes.Interface, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	pod, err := c.CoreV1().Pods(tunnelnodes.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if _, err := c.CoreV1().Pods(tunnelnodes.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// finishJob plays the Job controller: the Job complete, or failed.
func finishJob(t *testing.T, c kubernetes.Interface, name string, complete bool) {
	t.Helper()
	ctx := context.Background()
	job, err := c.BatchV1().Jobs(tunnelnodes.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, Succeeded: 1, CompletionTime: &now, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if !complete {
		job.Status = batchv1.JobStatus{StartTime: &now, Failed: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastTransitionTime: now}}}
	}
	if _, err := c.BatchV1().Jobs(tunnelnodes.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestControlPlaneJobsOneNodeAtATime: on three stacked control-plane nodes
// install creates the next node's patch Job only once the last one
// completed and that node's kube-apiserver and etcd mirror pods are Ready
// again; a node whose Job fails stops it there. The test plays the Job
// controller and the kubelets, which envtest does not run.
func TestControlPlaneJobsOneNodeAtATime(t *testing.T) {
	cp := harness.Start(t, harness.Options{})
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const image = "example/tunnel-nodes-sync:test"
	env := &engine.Env{Client: c, Clientset: cp.Client, Options: engine.Options{Timeout: 30 * time.Second, ControlPlaneJobs: true, SyncImage: image}}
	nodes := []string{"master-1", "master-2", "master-3"}
	// Created last first: the order is ControlPlaneNodes', sorted.
	for i := len(nodes) - 1; i >= 0; i-- {
		createMirrorPod(t, cp.Client, "kube-apiserver", nodes[i])
		createMirrorPod(t, cp.Client, "etcd", nodes[i])
	}
	job := func(node string) string {
		return manifestJob(node, "patch", image, "/etc/kubernetes/patches", false, env.Options).Name
	}
	exists := func(node string) bool {
		t.Helper()
		_, err := cp.Client.BatchV1().Jobs(tunnelnodes.Namespace).Get(ctx, job(node), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	// noJobFor asserts, for a while, that node has no Job yet.
	noJobFor := func(node, while string) {
		t.Helper()
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if exists(node) {
				t.Fatalf("a Job on %s while %s", node, while)
			}
		}
	}
	jobOn := func(node string) {
		t.Helper()
		harness.Eventually(t, 10*time.Second, func() error {
			if !exists(node) {
				return fmt.Errorf("no Job on %s", node)
			}
			return nil
		})
	}

	done := make(chan error, 1)
	go func() {
		_, err := runManifestJobs(ctx, env, newStepState(), "patch", false)
		done <- err
	}()
	jobOn("master-1")
	noJobFor("master-2", "master-1's Job runs")

	// The kubelet restarts master-1's kube-apiserver; etcd is shown not
	// Ready too, to see that its Ready is waited for as well.
	setPodReady(t, cp.Client, "kube-apiserver-master-1", false)
	setPodReady(t, cp.Client, "etcd-master-1", false)
	finishJob(t, cp.Client, job("master-1"), true)
	noJobFor("master-2", "master-1's kube-apiserver and etcd are not Ready")
	setPodReady(t, cp.Client, "kube-apiserver-master-1", true)
	noJobFor("master-2", "master-1's etcd is not Ready")
	setPodReady(t, cp.Client, "etcd-master-1", true)
	jobOn("master-2")
	noJobFor("master-3", "master-2's Job runs")

	finishJob(t, cp.Client, job("master-2"), false)
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("install still running after master-2's Job failed")
	}
	if err == nil || !strings.Contains(err.Error(), "patch Job on master-2: Job "+job("master-2")+" failed: ") ||
		!strings.Contains(err.Error(), "; done on master-1 (kube-apiserver serving, etcd healthy after ") || !strings.Contains(err.Error(), "; not started on master-3") {
		t.Errorf("install: %v; want master-2's failure, master-1 done, master-3 not started", err)
	}
	if exists("master-3") {
		t.Error("a Job on master-3 after master-2's failed")
	}
}
