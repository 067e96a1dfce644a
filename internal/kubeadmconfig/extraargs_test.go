package kubeadmconfig

import (
	"strings"
	"testing"
)

// v1beta4 is a ClusterConfiguration as kubeadm v1.37 uploads it.
const v1beta4 = `apiServer:
  certSANs:
  - 198.51.100.10
  extraArgs:
  - name: audit-log-path
    value: /var/log/kubernetes/audit.log
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: yurtdns-test
controllerManager: {}
dns: {}
encryptionAlgorithm: RSA-2048
kind: ClusterConfiguration
kubernetesVersion: v1.36.3
networking:
  dnsDomain: cluster.local
scheduler: {}
`

const v1beta3 = `apiServer:
  extraArgs:
    authorization-mode: Node,RBAC
apiVersion: kubeadm.k8s.io/v1beta3
controllerManager:
  extraArgs:
    controllers: '*,bootstrapsigner'
kind: ClusterConfiguration
kubernetesVersion: v1.30.0
`

var installArgs = []Arg{
	{APIServer, "kubelet-preferred-address-types", "Hostname,InternalIP,ExternalIP"},
	{ControllerManager, "controllers", "-nodelifecycle,*,bootstrapsigner,tokencleaner"},
}

func TestSetAndUnsetExtraArgs(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string // lines the edited text must hold
	}{
		{"v1beta4 list, controllerManager empty", v1beta4, []string{
			"  - name: kubelet-preferred-address-types\n    value: Hostname,InternalIP,ExternalIP\n",
			"controllerManager:\n  extraArgs:\n  - name: controllers\n    value: -nodelifecycle,*,bootstrapsigner,tokencleaner\n",
			"  - name: audit-log-path\n",
		}},
		{"v1beta3 map, controllers replaced", v1beta3, []string{
			"    kubelet-preferred-address-types: Hostname,InternalIP,ExternalIP\n",
			"    controllers: '-nodelifecycle,*,bootstrapsigner,tokencleaner'\n",
			"    authorization-mode: Node,RBAC\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := SetExtraArgs(tc.in, installArgs)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(set, w) {
					t.Errorf("set: no %q in\n%s", w, set)
				}
			}
			for _, a := range installArgs {
				if v, ok, err := ExtraArg(set, a.Component, a.Name); err != nil || !ok || v != a.Value {
					t.Errorf("ExtraArg %s %s = %q %v %v", a.Component, a.Name, v, ok, err)
				}
			}
			again, err := SetExtraArgs(set, installArgs)
			if err != nil || again != set {
				t.Errorf("setting twice changed the text (%v):\n%s", err, again)
			}
			back, err := UnsetExtraArgs(set, installArgs, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if back != tc.in {
				t.Errorf("unset: got\n%s\nwant\n%s", back, tc.in)
			}
		})
	}
}

// After kubeadm upgrade re-marshals the ConfigMap (kubernetesVersion moved
// on), unset takes out only install's args.
func TestUnsetAfterUpgrade(t *testing.T) {
	set, err := SetExtraArgs(v1beta4, installArgs)
	if err != nil {
		t.Fatal(err)
	}
	upgraded := strings.Replace(set, "kubernetesVersion: v1.36.3", "kubernetesVersion: v1.37.1", 1)
	back, err := UnsetExtraArgs(upgraded, installArgs, v1beta4)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(v1beta4, "v1.36.3", "v1.37.1", 1); back != want {
		t.Errorf("got\n%s\nwant\n%s", back, want)
	}
}

// A value changed since install is the user's: left as it is.
func TestUnsetLeavesAChangedArg(t *testing.T) {
	set, err := SetExtraArgs(v1beta4, []Arg{{APIServer, "kubelet-preferred-address-types", "InternalIP"}})
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnsetExtraArgs(set, installArgs, v1beta4)
	if err != nil || back != set {
		t.Errorf("%v:\n%s", err, back)
	}
}

func TestBadInput(t *testing.T) {
	for _, in := range []string{"", "kind: InitConfiguration\n", "- a\n", "kind: ClusterConfiguration\napiServer: 3\n",
		"kind: ClusterConfiguration\napiServer:\n  extraArgs: x\n", strings.Repeat("a", maxConfig+1),
		// kubeadm's strict decoder refuses a key named twice: set would edit one, a reader take the other.
		"kind: ClusterConfiguration\napiServer:\n extraArgs:\n extraArgs: 0\n"} {
		if _, err := SetExtraArgs(in, installArgs); err == nil {
			t.Errorf("SetExtraArgs(%.40q): no error", in)
		}
	}
}

func FuzzExtraArgs(f *testing.F) {
	f.Add(v1beta4)
	f.Add(v1beta3)
	f.Fuzz(func(t *testing.T, in string) {
		set, err := SetExtraArgs(in, installArgs)
		if err != nil {
			return
		}
		for _, a := range installArgs {
			if v, ok, err := ExtraArg(set, a.Component, a.Name); err != nil || !ok || v != a.Value {
				t.Fatalf("after set, %s %s = %q %v %v\n%s", a.Component, a.Name, v, ok, err, set)
			}
		}
		back, err := UnsetExtraArgs(set, installArgs, in)
		if err != nil {
			t.Fatalf("unset: %v", err)
		}
		for _, a := range installArgs {
			was, had, _ := ExtraArg(in, a.Component, a.Name)
			v, ok, err := ExtraArg(back, a.Component, a.Name)
			if err != nil || ok != had || v != was {
				t.Fatalf("after unset, %s %s = %q %v (%v), before %q %v", a.Component, a.Name, v, ok, err, was, had)
			}
		}
	})
}
