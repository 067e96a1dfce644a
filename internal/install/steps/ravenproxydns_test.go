package steps

import (
	"os"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/corefile"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestRavenCorefile: the Corefile of upstream's raven-proxy-dns.yaml (the
// e2e fixture) gets yurthosts in place of its hosts block, every other byte
// kept; a second edit changes nothing.
func TestRavenCorefile(t *testing.T) {
	data, err := os.ReadFile("../../../test/testdata/raven/raven-proxy-dns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var stock string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var cm corev1.ConfigMap
		if yaml.Unmarshal([]byte(doc), &cm) == nil && cm.Kind == "ConfigMap" && cm.Name == tunnelnodes.RavenProxyDNSName {
			stock = cm.Data[kube.CorefileKey]
		}
	}
	const hosts = "hosts /etc/edge/tunnel-nodes {\n        reload 300ms\n        fallthrough\n    }"
	if !strings.Contains(stock, hosts) {
		t.Fatalf("the fixture's Corefile has no hosts block:\n%s", stock)
	}
	want := strings.Replace(stock, hosts, "yurthosts {\n        configmap kube-system/edge-tunnel-nodes\n"+
		"        service kube-system/x-raven-proxy-internal-svc\n        shards yurtdns-records\n        fallthrough\n    }", 1)
	raven, err := layout.Named(layout.Raven)
	if err != nil {
		t.Fatal(err)
	}
	got, changed, err := corefile.EnsureYurthosts(stock, raven.YurthostsOptions)
	if err != nil || !changed || got != want {
		t.Fatalf("changed %v, err %v:\n%s\nwant:\n%s", changed, err, got, want)
	}
	if again, changed, _ := corefile.EnsureYurthosts(got, raven.YurthostsOptions); changed || again != got {
		t.Errorf("a second edit changed it:\n%s", again)
	}
}

// TestSwapRavenProxyDNS: raven-proxy-dns's pod spec as upstream's manifest
// has it becomes coredns-yurt's, and a second swap changes nothing.
func TestSwapRavenProxyDNS(t *testing.T) {
	cmVolume := func(name, cm string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}
	}
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "raven-proxy-dns", Image: "coredns/coredns:1.9.3",
			VolumeMounts: []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/raven-proxy-dns"}, {Name: "hosts", MountPath: "/etc/edge"}}}},
		Volumes: []corev1.Volume{cmVolume("config-volume", "raven-proxy-dns"), cmVolume("hosts", "edge-tunnel-nodes")},
	}
	for range 2 {
		if err := swapRavenProxyDNS(&spec, "coredns-yurt:test"); err != nil {
			t.Fatal(err)
		}
		c := spec.Containers[0]
		if c.Image != "coredns-yurt:test" || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "config-volume" ||
			len(spec.Volumes) != 1 || spec.Volumes[0].ConfigMap.Name != ravenProxyDNSYurt {
			t.Fatalf("swapped spec: %+v", spec)
		}
	}
	if err := swapRavenProxyDNS(&corev1.PodSpec{}, "x"); err == nil {
		t.Error("a Deployment without raven-proxy-dns's Corefile volume was swapped")
	}
}
