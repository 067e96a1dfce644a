package install

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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

// The kube-proxy step edits only where yurthub serves the in-cluster config
// on every node, and not when the line is already commented out or empty.
func TestKubeProxySkipReason(t *testing.T) {
	ctx := context.Background()
	conf := kubeProxyConf(t)
	nodes := []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
	}
	yurthub := func(name, node string) client.Object {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	commented, err := CommentOutKubeconfig(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		conf string
		pods []client.Object
		want string
	}{
		{"no yurthub", conf, nil, "no yurthub found"},
		{"a yurthub elsewhere", conf, []client.Object{yurthub("yurt-hub-master-2", "master-1")}, "no yurthub found"},
		{"one node without", conf, []client.Object{yurthub("yurt-hub-worker-1", "worker-1")}, "yurthub does not run on master-1: there kube-proxy would reach the apiserver"},
		{"everywhere", conf, []client.Object{yurthub("yurt-hub-cloud-master-1", "master-1"), yurthub("yurt-hub-worker-1", "worker-1")}, ""},
		{"already commented out", commented, nil, "already commented out or empty"},
		{"empty", strings.Replace(conf, "kubeconfig: /var/lib/kube-proxy/kubeconfig.conf", `kubeconfig: ""`, 1), nil, "already commented out or empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: kubeProxyName},
				Data: map[string]string{kubeProxyConfKey: tc.conf}}
			c := fake.NewClientBuilder().WithObjects(append(append([]client.Object{cm}, nodes...), tc.pods...)...).Build()
			env := &Env{Client: c}
			step := kubeProxyStep()
			reason, err := kubeProxySkipReason(ctx, env, configMapKeyEdit(kubeProxyName, kubeProxyConfKey, nil))
			if err != nil || !strings.Contains(reason, tc.want) || (tc.want == "") != (reason == "") {
				t.Fatalf("reason %q, %v; want %q", reason, err, tc.want)
			}
			if tc.want == "" {
				return
			}
			res, err := step.Install(ctx, env, newStepState())
			if err != nil || !res.Skipped || res.Changed || res.Summary != "skipped: "+reason {
				t.Errorf("install: %+v, %v; want it skipped with the reason", res, err)
			}
			got := &corev1.ConfigMap{}
			if err := c.Get(ctx, key(kubeProxyName), got); err != nil || got.Data[kubeProxyConfKey] != tc.conf {
				t.Errorf("the skipped step changed config.conf")
			}
		})
	}
}

// Versions are read strictly: an unstamped build's version is an error that
// names it, never an old server.
func TestServerOlderThan(t *testing.T) {
	for v, want := range map[string]string{"v1.21.14": "true", "v1.22.0": "false", "v1.37.1": "false", "v1.30.2-gke.1234": "false",
		"v0.0.0-master+$Format:%H$": `cannot tell the apiserver's version from "v0.0.0-master+$Format:%H$"`, "v0.0.0": "cannot tell"} {
		env := &Env{serverVersion: &version.Info{GitVersion: v}}
		old, err := env.serverOlderThan(1, 22)
		got := strconv.FormatBool(old)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s: %s, want %s", v, got, want)
		}
	}
}
