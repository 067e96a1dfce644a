package steps

import (
	"context"
	"testing"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestImageTag(t *testing.T) {
	for ref, want := range map[string]string{
		"docker.io/openyurt/yurt-manager:v1.7.0":    "v1.7.0",
		"registry.local:5000/openyurt/yurt-manager": "",
		"registry.local:5000/yurt-manager:v1.6.1":   "v1.6.1",
		"openyurt/yurt-manager:v1.7.0@sha256:abcd":  "v1.7.0",
		"openyurt/yurt-manager@sha256:abcd":         "",
		"yurt-manager":                              "",
	} {
		if got := imageTag(ref); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", ref, got, want)
		}
	}
}

// Whether the control-plane step leaves kube-controller-manager alone:
// OpenYurt v1.6 or later by yurt-manager's label or image tag, else not;
// --kcm-nodelifecycle forces either.
func TestKeepNodeLifecycle(t *testing.T) {
	yurtManager := func(version, image string) client.Object {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "yurt-manager", Namespace: tunnelnodes.Namespace, Labels: map[string]string{}},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "yurt-manager", Image: image}}}}}}
		if version != "" {
			d.Labels["app.kubernetes.io/version"] = version
		}
		return d
	}
	for _, tc := range []struct {
		name    string
		objects []client.Object
		flag    string
		keep    bool
	}{
		{name: "no yurt-manager"},
		{name: "v1.7.0 label", objects: []client.Object{yurtManager("v1.7.0", "yurt-manager:latest")}, keep: true},
		{name: "v1.6.0 image", objects: []client.Object{yurtManager("", "openyurt/yurt-manager:v1.6.0")}, keep: true},
		{name: "v1.5.3 label wins over the image", objects: []client.Object{yurtManager("v1.5.3", "openyurt/yurt-manager:v1.7.0")}},
		{name: "latest only", objects: []client.Object{yurtManager("", "openyurt/yurt-manager:latest")}},
		{name: "forced keep", flag: engine.NodeLifecycleKeep, keep: true},
		{name: "forced disable", objects: []client.Object{yurtManager("v1.7.0", "")}, flag: engine.NodeLifecycleDisable},
	} {
		env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(tc.objects...).Build(), Options: engine.Options{NodeLifecycle: tc.flag}}
		keep, why, err := keepNodeLifecycle(context.Background(), env)
		if err != nil || keep != tc.keep || keep == (why == "") {
			t.Errorf("%s: keep %v (%q), err %v; want keep %v", tc.name, keep, why, err, tc.keep)
		}
	}
}
