package staticpod

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("../../test/testdata/kubeadm/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func decodePod(t *testing.T, data []byte) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(data, pod); err != nil {
		t.Fatalf("result is not a valid Pod: %v", err)
	}
	return pod
}

// changedLines returns the lines of b that are not in a.
func changedLines(a, b []byte) []string {
	have := map[string]int{}
	for _, l := range strings.Split(string(a), "\n") {
		have[l]++
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if have[l] > 0 {
			have[l]--
			continue
		}
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

func TestPatchControllerManager(t *testing.T) {
	orig := readFixture(t, "kube-controller-manager.yaml")
	out, changed, err := patchControllerManager(orig)
	if err != nil || !changed {
		t.Fatalf("changed %v err %v", changed, err)
	}
	// kubeadm's value gains -nodelifecycle first; nothing else moves.
	if got := changedLines(orig, out); len(got) != 1 || got[0] != "- --controllers=-nodelifecycle,*,bootstrapsigner,tokencleaner" {
		t.Errorf("changed lines %q", got)
	}
	decodePod(t, out)
	again, changed, err := patchControllerManager(out)
	if err != nil || changed || string(again) != string(out) {
		t.Errorf("second patch: changed %v err %v", changed, err)
	}
}

func TestControllersValue(t *testing.T) {
	for _, tc := range []struct {
		value   string
		present bool
		want    string
	}{
		{"", false, "-nodelifecycle,*"},
		{"*,bootstrapsigner,tokencleaner", true, "-nodelifecycle,*,bootstrapsigner,tokencleaner"},
		{"-nodelifecycle,*", true, "-nodelifecycle,*"},
		{"*,-nodelifecycle", true, "*,-nodelifecycle"},
		{"*,nodelifecycle", true, "-nodelifecycle,*"},
	} {
		if got := ControllersWithoutNodeLifecycle(tc.value, tc.present); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.value, got, tc.want)
		}
	}
}

func TestPatchAPIServer(t *testing.T) {
	orig := readFixture(t, "kube-apiserver.yaml")
	out, changed, err := patchAPIServer(orig)
	if err != nil || !changed {
		t.Fatalf("changed %v err %v", changed, err)
	}
	got := changedLines(orig, out)
	want := []string{"- --kubelet-preferred-address-types=Hostname,InternalIP,ExternalIP", "dnsPolicy: ClusterFirstWithHostNet"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("changed lines %q, want %q", got, want)
	}
	if pod := decodePod(t, out); pod.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet || !pod.Spec.HostNetwork {
		t.Errorf("dnsPolicy %q hostNetwork %v", pod.Spec.DNSPolicy, pod.Spec.HostNetwork)
	}
	again, changed, err := patchAPIServer(out)
	if err != nil || changed || string(again) != string(out) {
		t.Errorf("second patch: changed %v err %v", changed, err)
	}
}

func TestPatchRefusesUnexpectedManifests(t *testing.T) {
	apiserver := string(readFixture(t, "kube-apiserver.yaml"))
	for name, manifest := range map[string]string{
		"not yaml":         "{{{",
		"not a pod":        strings.Replace(apiserver, "kind: Pod", "kind: Deployment", 1),
		"two documents":    apiserver + "---\n" + apiserver,
		"no containers":    "apiVersion: v1\nkind: Pod\nspec: {}\n",
		"two containers":   strings.Replace(apiserver, "  hostNetwork: true", "  - name: sidecar\n    image: x\n  hostNetwork: true", 1),
		"other container":  strings.Replace(apiserver, "name: kube-apiserver\n    ports", "name: something\n    ports", 1),
		"args not command": strings.Replace(apiserver, "  - command:", "  - args:", 1),
	} {
		if _, _, err := patchAPIServer([]byte(manifest)); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// FuzzPatchManifests: any input is refused or patched idempotently into a
// manifest that still decodes.
func FuzzPatchManifests(f *testing.F) {
	f.Add(readFixture(f, "kube-apiserver.yaml"))
	f.Add(readFixture(f, "kube-controller-manager.yaml"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, patch := range []func([]byte) ([]byte, bool, error){patchAPIServer, patchControllerManager} {
			out, _, err := patch(in)
			if err != nil {
				continue
			}
			again, changed, err := patch(out)
			if err != nil || changed || string(again) != string(out) {
				t.Fatalf("not idempotent: changed %v err %v", changed, err)
			}
		}
	})
}
