package steps

import (
	"testing"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/corefile"
	"github.com/yurtdns/yurtdns/internal/layout"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestDeployCoreDNSYurtMatchesInstall: deploy/coredns-yurt is what install
// makes of kubeadm's CoreDNS — the same DaemonSet pod template and strategy,
// the same Corefile.
func TestDeployCoreDNSYurtMatchesInstall(t *testing.T) {
	objs, err := deploy.Render(deploy.CoreDNSYurt)
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	var cm corev1.ConfigMap
	for _, o := range objs {
		switch o.GetKind() {
		case "DaemonSet":
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds)
		case "ConfigMap":
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cm)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var kubeadmDeployment appsv1.Deployment
	var kubeadmCM corev1.ConfigMap
	kubeadmObject(t, "coredns.yaml", "Deployment", &kubeadmDeployment)
	kubeadmObject(t, "coredns.yaml", "ConfigMap", &kubeadmCM)

	installed, err := daemonSetFromDeployment(&kubeadmDeployment, ds.Spec.Template.Spec.Containers[0].Image)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(installed.Spec, ds.Spec) {
		t.Errorf("deploy/coredns-yurt DaemonSet spec differs from what install builds:\ninstall: %+v\ndeploy:  %+v", installed.Spec, ds.Spec)
	}
	corefile, _, err := corefile.EnsureYurthosts(kubeadmCM.Data["Corefile"], []string{layout.ShardsOption})
	if err != nil {
		t.Fatal(err)
	}
	if corefile != cm.Data["Corefile"] {
		t.Errorf("deploy/coredns-yurt Corefile:\n%s\ninstall makes:\n%s", cm.Data["Corefile"], corefile)
	}
}
