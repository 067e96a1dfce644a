package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// yurtTunnelServerArgs are the args of yurt-tunnel-server in OpenYurt's
// yurt-tunnel chart (charts/yurt-tunnel/templates/yurt-tunnel-server.yaml):
// no --enable-dns-controller, so its DNS controller runs.
var yurtTunnelServerArgs = []string{"--bind-address=$(POD_IP)", "--insecure-bind-address=$(POD_IP)", "--server-count=1"}

// createYurtTunnelServer creates Deployment kube-system/yurt-tunnel-server
// shaped like the chart's, its container running with args.
func createYurtTunnelServer(t *testing.T, cp *harness.ControlPlane, args ...string) {
	t.Helper()
	labels := map[string]string{"app": "yurt-tunnel-server"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "yurt-tunnel-server", Namespace: tunnelnodes.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				HostNetwork: true, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "yurt-tunnel-server", Image: "openyurt/yurt-tunnel-server:v1.7.0",
					Command: []string{"yurt-tunnel-server"}, Args: args,
					Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}}}}}},
	}
	if _, err := cp.Client.AppsV1().Deployments(tunnelnodes.Namespace).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Deployment yurt-tunnel-server: %v", err)
	}
}

// TestTunnelDNS: the tunnel-dns step on yurt-tunnel-server's
// --enable-dns-controller as it may be written — true, absent, alone
// before another flag, already false — and without the Deployment. A dry
// run changes nothing; install makes it false and waits until the pods run
// it; a second install, status and revert say what they find, and revert
// gives the args back exactly, pods included.
func TestTunnelDNS(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	ctx, ns := context.Background(), tunnelnodes.Namespace
	cp.CreateNode(t, harness.Node{Name: "master-1", InternalIP: "192.168.0.10", Ready: true,
		Labels: map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""}})
	stop := cp.PlayRolloutControllers(ns)
	defer stop()
	only := "--skip=" + strings.Join(slices.DeleteFunc(layoutSteps(layout.YurtTunnel), func(s string) bool { return s == "tunnel-dns" }), ",")
	deployments := cp.Client.AppsV1().Deployments(ns)
	args := func() []string {
		t.Helper()
		d, err := deployments.Get(ctx, "yurt-tunnel-server", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Args
	}
	// podArgs are the args of the pods that run: install and revert return
	// once the rollout is done.
	podArgs := func() [][]string {
		t.Helper()
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=yurt-tunnel-server"})
		if err != nil {
			t.Fatal(err)
		}
		var out [][]string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, p.Spec.Containers[0].Args)
			}
		}
		return out
	}
	const (
		installed = "[tunnel-dns] yurt-tunnel-server's DNS controller switched off (--enable-dns-controller=false): " +
			"the sync is the only writer of yurt-tunnel-nodes; yurt-tunnel-server rolled out"
		restored = "[tunnel-dns] restored Deployment kube-system/yurt-tunnel-server --enable-dns-controller"
	)

	for _, tc := range []struct {
		name       string
		args, want []string // want: the args after install
		diff       string   // in the dry run
	}{
		{name: "true", args: append(slices.Clone(yurtTunnelServerArgs), "--enable-dns-controller=true", "--v=2"),
			want: append(slices.Clone(yurtTunnelServerArgs), "--enable-dns-controller=false", "--v=2"), diff: "-true\n+false\n"},
		{name: "absent", args: yurtTunnelServerArgs, want: append(slices.Clone(yurtTunnelServerArgs), "--enable-dns-controller=false"), diff: "+false\n"},
		// Alone, pflag reads true and the next flag is a flag of its own.
		{name: "alone", args: []string{"--enable-dns-controller", "--v=2"}, want: []string{"--enable-dns-controller=false", "--v=2"}, diff: "+false\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			createYurtTunnelServer(t, cp, tc.args...)
			defer func() { _ = deployments.Delete(ctx, "yurt-tunnel-server", metav1.DeleteOptions{}) }()
			harness.Eventually(t, 10*time.Second, func() error { return rolledOut(podArgs(), tc.args) })

			out, err := runSync(t, cp, "install", "--dry-run", only)
			if err != nil || !strings.Contains(out, "[tunnel-dns] would: yurt-tunnel-server's DNS controller switched off") || !strings.Contains(out, tc.diff) {
				t.Errorf("dry run (%v): want the step's line and %q:\n%s", err, tc.diff, out)
			}
			if got := args(); !slices.Equal(got, tc.args) {
				t.Fatalf("the dry run changed the args to %q", got)
			}

			out, err = runSync(t, cp, "install", only)
			if err != nil || !strings.Contains(out, installed) {
				t.Fatalf("install (%v): want %q:\n%s", err, installed, out)
			}
			if got := args(); !slices.Equal(got, tc.want) {
				t.Errorf("args after install %q, want %q", got, tc.want)
			}
			if err := rolledOut(podArgs(), tc.want); err != nil {
				t.Errorf("install returned before the rollout: %v", err)
			}
			if out, err := runSync(t, cp, "install", only); err != nil || !strings.Contains(out, "[tunnel-dns] already applied") {
				t.Errorf("second install (%v):\n%s", err, out)
			}
			if out, err := runSync(t, cp, "status"); err != nil || !strings.Contains(out, "tunnel-dns         applied\n") {
				t.Errorf("status (%v):\n%s", err, out)
			}

			out, err = runSync(t, cp, "revert")
			if err != nil || !strings.Contains(out, restored) {
				t.Fatalf("revert (%v): want %q:\n%s", err, restored, out)
			}
			if got := args(); !slices.Equal(got, tc.args) {
				t.Errorf("args after revert %q, want %q", got, tc.args)
			}
			if err := rolledOut(podArgs(), tc.args); err != nil {
				t.Errorf("revert returned before the rollout: %v", err)
			}
		})
	}

	// Already off: nothing to write, nothing to restore.
	t.Run("false", func(t *testing.T) {
		off := append(slices.Clone(yurtTunnelServerArgs), "--enable-dns-controller=false")
		createYurtTunnelServer(t, cp, off...)
		defer func() { _ = deployments.Delete(ctx, "yurt-tunnel-server", metav1.DeleteOptions{}) }()
		d, _ := deployments.Get(ctx, "yurt-tunnel-server", metav1.GetOptions{})
		if out, err := runSync(t, cp, "install", only); err != nil || !strings.Contains(out, "[tunnel-dns] already applied") {
			t.Errorf("install (%v):\n%s", err, out)
		}
		if out, err := runSync(t, cp, "revert"); err != nil || !strings.Contains(out, "[tunnel-dns] nothing to restore") {
			t.Errorf("revert (%v):\n%s", err, out)
		}
		if now, _ := deployments.Get(ctx, "yurt-tunnel-server", metav1.GetOptions{}); now.Generation != d.Generation || !slices.Equal(args(), off) {
			t.Errorf("the Deployment was written: generation %d, then %d; args %q", d.Generation, now.Generation, args())
		}
	})

	// No yurt-tunnel-server: no DNS controller to switch off.
	t.Run("no Deployment", func(t *testing.T) {
		const why = "no Deployment kube-system/yurt-tunnel-server: no tunnel DNS controller writes yurt-tunnel-nodes"
		if out, err := runSync(t, cp, "install", only); err != nil || !strings.Contains(out, "[tunnel-dns] skipped: "+why) {
			t.Errorf("install (%v):\n%s", err, out)
		}
		// The only step install was asked for was skipped: nothing is installed.
		if out, err := runSync(t, cp, "status"); exitCode(t, err) != exitNotInstalled || !strings.Contains(out, "tunnel-dns         not applied (skipped by install: "+why+")") {
			t.Errorf("status (%v):\n%s", err, out)
		}
		if out, err := runSync(t, cp, "revert"); err != nil || !strings.Contains(out, "[tunnel-dns] not applied: nothing to revert") {
			t.Errorf("revert (%v):\n%s", err, out)
		}
	})
}

// rolledOut: the Deployment's one pod runs args.
func rolledOut(pods [][]string, args []string) error {
	if len(pods) != 1 || !slices.Equal(pods[0], args) {
		return fmt.Errorf("yurt-tunnel-server's pods run %q, want one running %q", pods, args)
	}
	return nil
}
