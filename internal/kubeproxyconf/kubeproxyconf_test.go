package kubeproxyconf

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// kubeProxyConf is config.conf of kubeadm's kube-proxy ConfigMap.
func kubeProxyConf(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile("../../test/testdata/kubeadm/kube-proxy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	first, _, _ := strings.Cut(string(data), "\n---\n")
	if err := yaml.Unmarshal([]byte(first), &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["config.conf"]
}

func TestCommentOutKubeconfig(t *testing.T) {
	conf := kubeProxyConf(t)
	out, err := CommentOutKubeconfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(conf, "  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf", "  #kubeconfig: /var/lib/kube-proxy/kubeconfig.conf", 1); out != want {
		t.Errorf("got:\n%s", out)
	}
	if again, err := CommentOutKubeconfig(out); err != nil || again != out {
		t.Errorf("not idempotent: %v", err)
	}
	for name, bad := range map[string]string{
		"not yaml":    "{{",
		"other kind":  "kind: Pod\n",
		"flow layout": "kind: KubeProxyConfiguration\nclientConnection: {kubeconfig: /x}\n",
	} {
		if _, err := CommentOutKubeconfig(bad); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestEnableEndpointSliceProxyingOff(t *testing.T) {
	conf := kubeProxyConf(t)
	out, err := EnableEndpointSliceProxyingOff(conf)
	if err != nil || out != conf+"\nfeatureGates:\n  EndpointSliceProxying: false\n" {
		t.Fatalf("no featureGates: %v\n%q", err, out[len(out)-80:])
	}
	withGates := "kind: KubeProxyConfiguration\nfeatureGates:\n    Foo: true\nmode: ipvs\n"
	out, err = EnableEndpointSliceProxyingOff(withGates)
	if err != nil || out != "kind: KubeProxyConfiguration\nfeatureGates:\n    EndpointSliceProxying: false\n    Foo: true\nmode: ipvs\n" {
		t.Errorf("existing featureGates: %v\n%s", err, out)
	}
	if again, err := EnableEndpointSliceProxyingOff(out); err != nil || again != out {
		t.Errorf("not idempotent: %v", err)
	}
	if _, err := EnableEndpointSliceProxyingOff("kind: KubeProxyConfiguration\nfeatureGates:\n  EndpointSliceProxying: true\n"); err == nil {
		t.Error("want an error when the gate is explicitly on")
	}
	// YAML reads a lone \r as a line break, a split on "\n" does not: the
	// gate went onto the wrong line (make test's fuzzing found it).
	if out, err := EnableEndpointSliceProxyingOff("kind: KubeProxyConfiguration\rfeatureGates:\n 0:"); err == nil {
		t.Errorf("lone carriage return: want an error, got %q", out)
	}
}

// FuzzKubeProxyConf: the config.conf edits never panic and are idempotent.
func FuzzKubeProxyConf(f *testing.F) {
	f.Add(kubeProxyConf(f))
	f.Fuzz(func(t *testing.T, conf string) {
		for _, edit := range []func(string) (string, error){CommentOutKubeconfig, EnableEndpointSliceProxyingOff} {
			out, err := edit(conf)
			if err != nil {
				continue
			}
			if again, err := edit(out); err != nil || again != out {
				t.Fatalf("not idempotent: %v\n%q\n%q", err, out, again)
			}
		}
	})
}
