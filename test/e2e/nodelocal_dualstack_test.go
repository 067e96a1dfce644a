package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/nodelocal/leftover"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeLocalDNSDualStackDryRun: on an apiserver with a service range of
// each family, install --node-local-dns --dry-run learns from a dry-run
// apply of kube-dns-upstream (PreferDualStack) that the cluster has both:
// the caches would bind 169.254.20.10 and fd84:5bd1:ae3::10, health and
// ready on the first, and set both up; nothing is created.
func TestNodeLocalDNSDualStackDryRun(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{DualStack: true})
	ctx := context.Background()
	out := mustRunSync(t, cp.Kubeconfig, "install", "--node-local-dns", "--dry-run",
		"--skip=rbac,corefile,coredns-daemonset,kube-dns-topology,kube-proxy,control-plane,sync")
	for _, want := range []string{"[node-local-dns] would:", "kube-dns-upstream", "+  ipFamilyPolicy: PreferDualStack",
		"bind 169.254.20.10 fd84:5bd1:ae3::10", "health 169.254.20.10:8080", "ready 169.254.20.10:8181"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q", want)
		}
	}
	// The caches' setup and the per-node Jobs: one --address per family.
	if setup := regexp.MustCompile(`--address\n\+\s+- 169\.254\.20\.10\n\+\s+- --address\n\+\s+- fd84:5bd1:ae3::10\n`); !setup.MatchString(out) {
		t.Errorf("dry run does not set up both addresses (%s)", setup)
	}
	if t.Failed() {
		t.Logf("dry run:\n%s", out)
	}
	if _, err := cp.Client.CoreV1().Services(tunnelnodes.Namespace).Get(ctx, "kube-dns-upstream", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kube-dns-upstream after the dry run: %v, want not found", err)
	}
}

// TestRevertLeavesNodeLocalForwarderDualStack: the nodes were set up with
// both addresses (their records say so): the leftover forwarder revert
// leaves binds both and sets up and lingers on both, and status names both.
func TestRevertLeavesNodeLocalForwarderDualStack(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	since, until := metav1.NewTime(time.Now().Add(-time.Hour)), metav1.NewTime(time.Now().Add(time.Hour))
	node := "worker-1"
	cp.CreateNode(t, harness.Node{Name: node, InternalIP: "192.168.0.21", Edge: true, Ready: true})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Image: "web:1"}}}}
	if _, err := cp.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	records := map[string]engine.Record{"kubelet " + node: {Kubelet: &engine.KubeletRecord{Node: node, Image: "tunnel-nodes-sync:test",
		Addresses: []string{"169.254.20.10", "fd84:5bd1:ae3::10"}, Since: &since, Until: &until}}}
	step, err := json.Marshal(engine.StepState{Applied: true, Records: records})
	if err != nil {
		t.Fatal(err)
	}
	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: engine.StateConfigMap, Namespace: tunnelnodes.Namespace,
		Annotations: map[string]string{engine.ProfileAnnotation: layout.YurtTunnel}}, Data: map[string]string{"node-local-dns": string(step)}}
	if _, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Create(ctx, state, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), "revert", "--kubeconfig", cp.Kubeconfig, "--timeout", "3s",
		"--sync-image", "tunnel-nodes-sync:test")
	err = p.Wait(t, time.Minute)
	if out := p.Output(); err == nil || !strings.Contains(out, "leftover forwarder on node worker-1 not Ready after 3s") {
		t.Fatalf("revert with the forwarder not Ready: want it to wait for it, got %v:\n%s", err, out)
	}

	ds, err := cp.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, leftover.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	both := []string{"--address", "169.254.20.10", "--address", "fd84:5bd1:ae3::10", "--interface", "lo"}
	for _, c := range slices.Concat(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers) {
		if c.Name == "coredns" {
			if c.ReadinessProbe.HTTPGet.Host != "169.254.20.10" {
				t.Errorf("readiness probe on %s, want 169.254.20.10", c.ReadinessProbe.HTTPGet.Host)
			}
			continue
		}
		if i := slices.Index(c.Args, "--address"); i < 0 || !slices.Equal(c.Args[i:i+len(both)], both) {
			t.Errorf("%s args %q, want %q", c.Name, c.Args, both)
		}
	}
	cm, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, leftover.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := cm.Data[leftover.CorefileKey]; !strings.Contains(c, "bind 169.254.20.10 fd84:5bd1:ae3::10\n") || !strings.Contains(c, "health 169.254.20.10:8082\n") {
		t.Errorf("leftover Corefile:\n%s", c)
	}
	st := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), "status", "--kubeconfig", cp.Kubeconfig)
	_ = st.Wait(t, time.Minute)
	if want := "leftover forwarder on 169.254.20.10,fd84:5bd1:ae3::10 for pods still resolving there: worker-1 (1 pods)"; !strings.Contains(st.Output(), want) {
		t.Errorf("status does not say %q:\n%s", want, st.Output())
	}
}
