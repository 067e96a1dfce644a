package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// completeJobs plays the Job controller (envtest runs none): every Job of
// the given action is marked complete, as if patch-manifests had run on its node.
func completeJobs(t *testing.T, cp *harness.ControlPlane, action string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			jobs, err := cp.Client.BatchV1().Jobs(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "yurtdns.io/job=" + action})
			if err == nil {
				for _, j := range jobs.Items {
					if j.Status.Succeeded > 0 {
						continue
					}
					now := metav1.Now()
					j.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1,
						Conditions: []batchv1.JobCondition{
							{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
							{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
						}}
					if _, err := cp.Client.BatchV1().Jobs(tunnelnodes.Namespace).UpdateStatus(ctx, &j, metav1.UpdateOptions{}); err != nil {
						t.Logf("marking job %s complete: %v", j.Name, err)
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// TestControlPlaneJobs: with --control-plane-jobs, install runs
// patch-manifests in a Job pinned to each control-plane node (found by its
// kube-apiserver mirror pod) with the host's /etc/kubernetes mounted, one
// node at a time; revert runs the restoring Jobs and cleans both up.
func TestControlPlaneJobs(t *testing.T) {
	t.Parallel()
	k := newKubeadmCluster(t)
	ctx := context.Background()
	k.CreateNode(t, harness.Node{Name: "master-2", InternalIP: "192.168.0.11"})
	for _, node := range []string{"master-1", "master-2"} {
		mirror := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-" + node, Namespace: tunnelnodes.Namespace,
				Labels: map[string]string{"component": "kube-apiserver", "tier": "control-plane"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "kube-apiserver", Image: "kube-apiserver:v1.37.1"}}},
		}
		created, err := k.Client.CoreV1().Pods(tunnelnodes.Namespace).Create(ctx, mirror, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Ready, as its kubelet has it: install waits for that on each node
		// before the next one's Job.
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := k.Client.CoreV1().Pods(tunnelnodes.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// One node at a time, each waited for: its kube-apiserver (no etcd
	// mirror pod here: as with external etcd).
	oneAtATime := func(action string) *regexp.Regexp {
		return regexp.MustCompile(`\[control-plane\] ` + action + ` Job on master-1 \(kube-apiserver serving after \d+s\), master-2 \(kube-apiserver serving after \d+s\): completed`)
	}
	only := "--skip=rbac,corefile,coredns-daemonset,kube-dns-topology,kube-proxy,tunnel-dns,sync"
	run := func(args ...string) string {
		t.Helper()
		p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), append([]string{args[0], "--kubeconfig", k.Kubeconfig, "--timeout", "20s"}, args[1:]...)...)
		if err := p.Wait(t, time.Minute); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, p.Output())
		}
		return p.Output()
	}

	stop := completeJobs(t, k.ControlPlane, "patch")
	out := run("install", "--control-plane-jobs", "--sync-image", "tunnel-nodes-sync:test", only)
	stop()
	if !oneAtATime("patch").MatchString(out) {
		t.Errorf("install output:\n%s", out)
	}
	jobs, err := k.Client.BatchV1().Jobs(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "yurtdns.io/job=patch"})
	if err != nil || len(jobs.Items) != 2 {
		t.Fatalf("patch jobs: %v %d", err, len(jobs.Items))
	}
	var pinned []string
	for _, j := range jobs.Items {
		spec := j.Spec.Template.Spec
		c := spec.Containers[0]
		pinned = append(pinned, spec.NodeName)
		if c.Image != "tunnel-nodes-sync:test" ||
			strings.Join(c.Args, " ") != "patch-manifests --manifests-dir /host/etc/kubernetes/manifests --backup-dir /host/etc/kubernetes/yurtdns-backup --kubeadm-patches-dir /host/etc/kubernetes/patches "+
				"--kubeconfig /host/etc/kubernetes/admin.conf --node-name "+spec.NodeName+" --timeout 20s --kcm-nodelifecycle disable" {
			t.Errorf("job %s container: %s %v", j.Name, c.Image, c.Args)
		}
		if len(spec.Volumes) != 1 || spec.Volumes[0].HostPath == nil || spec.Volumes[0].HostPath.Path != "/etc/kubernetes" ||
			c.VolumeMounts[0].MountPath != "/host/etc/kubernetes" {
			t.Errorf("job %s host mount: %+v %+v", j.Name, spec.Volumes, c.VolumeMounts)
		}
		if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists {
			t.Errorf("job %s tolerations %v", j.Name, spec.Tolerations)
		}
	}
	if strings.Join(pinned, ",") != "master-1,master-2" && strings.Join(pinned, ",") != "master-2,master-1" {
		t.Errorf("jobs pinned to %v", pinned)
	}

	stop = completeJobs(t, k.ControlPlane, "restore")
	out = run("revert")
	stop()
	if !oneAtATime("restore").MatchString(out) {
		t.Errorf("revert output:\n%s", out)
	}
	harness.Eventually(t, 5*time.Second, func() error {
		left, err := k.Client.BatchV1().Jobs(tunnelnodes.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=yurtdns"})
		if err != nil {
			return err
		}
		if n := len(left.Items); n != 0 {
			return fmt.Errorf("%d Jobs left after revert", n)
		}
		return nil
	})
}
