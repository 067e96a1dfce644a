package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The control-plane step reads OpenYurt's version from yurt-manager's
// Deployment: from v1.6 on kube-controller-manager keeps its node
// lifecycle controller (yurt-manager keeps autonomous nodes' pods served),
// so its manifest stays byte for byte and the step's line says why; an
// older OpenYurt still gets -nodelifecycle; --kcm-nodelifecycle forces
// either.
func TestControlPlaneStepFollowsOpenYurtVersion(t *testing.T) {
	t.Parallel()
	k := newKubeadmCluster(t)
	ctx := context.Background()
	kcm := filepath.Join(k.manifests, "kube-controller-manager.yaml")
	apiserver := filepath.Join(k.manifests, "kube-apiserver.yaml")
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	kcmBefore, apiserverBefore := read(kcm), read(apiserver)
	deployments := k.Client.AppsV1().Deployments(tunnelnodes.Namespace)
	setYurtManager := func(version, image string) {
		_ = deployments.Delete(ctx, "yurt-manager", metav1.DeleteOptions{})
		if image == "" {
			return
		}
		labels := map[string]string{"app.kubernetes.io/name": "yurt-manager"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "yurt-manager", Namespace: tunnelnodes.Namespace, Labels: map[string]string{"app.kubernetes.io/name": "yurt-manager"}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "yurt-manager", Image: image}}}}},
		}
		if version != "" {
			d.Labels["app.kubernetes.io/version"] = version
		}
		if _, err := deployments.Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	skip := "--skip=records,rbac,corefile,coredns-daemonset,kube-dns-topology,kube-proxy,tunnel-dns,sync,prometheus"
	for _, tc := range []struct {
		name, version, image, flag string
		keep                       bool
		line                       string
	}{
		{name: "v1.7.0 by its label", version: "v1.7.0", image: "docker.io/openyurt/yurt-manager:v1.7.0", keep: true,
			line: "[control-plane] kube-apiserver prefers Hostname and resolves it through cluster DNS; kube-controller-manager left as it is: " +
				"OpenYurt v1.7.0 (the label app.kubernetes.io/version of Deployment kube-system/yurt-manager) keeps the pods of autonomous nodes itself since v1.6"},
		{name: "v1.6.1 by its image tag", image: "registry.local:5000/openyurt/yurt-manager:v1.6.1", keep: true,
			line: "kube-controller-manager left as it is: OpenYurt v1.6.1 (image registry.local:5000/openyurt/yurt-manager:v1.6.1)"},
		{name: "v1.5.0", version: "v1.5.0", image: "openyurt/yurt-manager:v1.5.0",
			line: "[control-plane] kube-controller-manager --controllers gains -nodelifecycle; kube-apiserver prefers Hostname"},
		{name: "no yurt-manager", line: "[control-plane] kube-controller-manager --controllers gains -nodelifecycle"},
		{name: "v1.7.0, forced off", version: "v1.7.0", image: "openyurt/yurt-manager:v1.7.0", flag: "--kcm-nodelifecycle=disable",
			line: "[control-plane] kube-controller-manager --controllers gains -nodelifecycle"},
		{name: "none, forced on", flag: "--kcm-nodelifecycle=keep", keep: true,
			line: "kube-controller-manager left as it is: --kcm-nodelifecycle keep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setYurtManager(tc.version, tc.image)
			args := []string{"install", skip}
			if tc.flag != "" {
				args = append(args, tc.flag)
			}
			out, err := k.run(t, args...)
			if err != nil || !strings.Contains(out, tc.line) {
				t.Fatalf("install: %v\n%s\nwant a line with %q", err, out, tc.line)
			}
			switch got := read(kcm); {
			case tc.keep && got != kcmBefore:
				t.Errorf("kube-controller-manager.yaml changed:\n%s", got)
			case !tc.keep && !strings.Contains(got, "-nodelifecycle"):
				t.Errorf("kube-controller-manager.yaml has no -nodelifecycle:\n%s", got)
			}
			if read(apiserver) == apiserverBefore {
				t.Error("kube-apiserver.yaml was not patched")
			}
			if out, err := k.run(t, "revert"); err != nil || read(kcm) != kcmBefore || read(apiserver) != apiserverBefore {
				t.Fatalf("revert: %v\n%s\nthe manifests are not the originals", err, out)
			}
		})
	}
	if out, err := k.run(t, "install", skip, "--kcm-nodelifecycle=sometimes"); err == nil || !strings.Contains(out, `--kcm-nodelifecycle "sometimes": must be one of auto, disable, keep`) {
		t.Errorf("a bad --kcm-nodelifecycle: %v\n%s", err, out)
	}
}
