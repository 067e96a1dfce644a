package install

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// ravenCorefile is the Corefile of upstream's config/setup/raven-proxy-dns.yaml.
const ravenCorefile = `.:53 {
    errors
    health {
      lameduck 5s
    }
    ready
    hosts /etc/edge/tunnel-nodes {
        reload 300ms
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
}
`

func TestRavenCorefile(t *testing.T) {
	got, changed, err := ensureYurthosts(ravenCorefile, ravenYurthostsOptions)
	want := `.:53 {
    errors
    health {
      lameduck 5s
    }
    ready
    yurthosts {
        configmap kube-system/edge-tunnel-nodes
        service kube-system/x-raven-proxy-internal-svc
        fallthrough
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
}
`
	if err != nil || !changed || got != want {
		t.Fatalf("changed %v, err %v:\n%s\nwant:\n%s", changed, err, got, want)
	}
	if again, changed, _ := ensureYurthosts(got, ravenYurthostsOptions); changed || again != got {
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
