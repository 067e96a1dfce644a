package nodelocal

import (
	"slices"
	"strings"
	"testing"
)

// kubeadm's /var/lib/kubelet/config.yaml, shortened.
const kubeadmKubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
cgroupDriver: cgroupfs
# set by kubeadm from the cluster's service CIDR
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
healthzBindAddress: 127.0.0.1
healthzPort: 10248
kind: KubeletConfiguration
`

func TestSetClusterDNS(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		servers  []string
		changed  bool
		want     []string // clusterDNS afterwards
		err      string
	}{
		{name: "kubeadm's file to node-local", in: kubeadmKubeletConfig, servers: []string{"169.254.20.10"}, changed: true, want: []string{"169.254.20.10"}},
		{name: "already there", in: kubeadmKubeletConfig, servers: []string{"10.96.0.10"}, want: []string{"10.96.0.10"}},
		{name: "no clusterDNS yet", in: "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n", servers: []string{"169.254.20.10"}, changed: true, want: []string{"169.254.20.10"}},
		{name: "two servers back", in: strings.Replace(kubeadmKubeletConfig, "- 10.96.0.10", "- 169.254.20.10", 1), servers: []string{"10.96.0.10", "10.96.0.11"}, changed: true, want: []string{"10.96.0.10", "10.96.0.11"}},
		{name: "not a KubeletConfiguration", in: "kind: ConfigMap\n", servers: []string{"169.254.20.10"}, err: "not a KubeletConfiguration"},
		{name: "not a mapping", in: "- a\n", servers: []string{"169.254.20.10"}, err: "not a YAML mapping"},
		{name: "clusterDNS not a list", in: "kind: KubeletConfiguration\nclusterDNS: {a: b}\n", servers: []string{"169.254.20.10"}, err: "clusterDNS"},
		{name: "too large", in: "kind: KubeletConfiguration\n#" + strings.Repeat("x", maxKubeletConfig), servers: []string{"169.254.20.10"}, err: "over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, err := SetClusterDNS([]byte(tc.in), tc.servers)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || changed != tc.changed {
				t.Fatalf("changed %v, err %v; want changed %v", changed, err, tc.changed)
			}
			if !changed && string(out) != tc.in {
				t.Errorf("unchanged, but the bytes differ:\n%s", out)
			}
			cfg, err := ParseKubeletConfig(out)
			if err != nil || !slices.Equal(cfg.ClusterDNS, tc.want) {
				t.Errorf("clusterDNS %v (%v), want %v; file:\n%s", cfg.ClusterDNS, err, tc.want, out)
			}
			if tc.in == kubeadmKubeletConfig && (cfg.ClusterDomain != "cluster.local" || !strings.Contains(string(out), "# set by kubeadm") ||
				!strings.Contains(string(out), "  anonymous:\n    enabled: false")) {
				t.Errorf("the rest of the file changed:\n%s", out)
			}
		})
	}
}

func TestParseKubeletConfigDefaults(t *testing.T) {
	cfg, err := ParseKubeletConfig([]byte("kind: KubeletConfiguration\nhealthzPort: 0\n"))
	if err != nil || cfg.HealthzPort != 0 || cfg.HealthzBindAddress != "127.0.0.1" || cfg.ClusterDNS != nil {
		t.Errorf("%+v, %v", cfg, err)
	}
	cfg, err = ParseKubeletConfig([]byte(kubeadmKubeletConfig))
	if err != nil || cfg.HealthzPort != 10248 || cfg.ClusterDomain != "cluster.local" {
		t.Errorf("%+v, %v", cfg, err)
	}
}

// FuzzSetClusterDNS: whatever the file, no panic; a file it accepts comes
// back parseable with exactly the servers asked for.
func FuzzSetClusterDNS(f *testing.F) {
	f.Add([]byte(kubeadmKubeletConfig), "169.254.20.10")
	f.Add([]byte("kind: KubeletConfiguration\nclusterDNS: []\n"), "10.96.0.10")
	f.Add([]byte("kind: KubeletConfiguration\nclusterDNS: &a [x]\nb: *a\n"), "1.2.3.4")
	f.Fuzz(func(t *testing.T, data []byte, server string) {
		out, _, err := SetClusterDNS(data, []string{server})
		if err != nil {
			return
		}
		cfg, err := ParseKubeletConfig(out)
		if err != nil {
			t.Fatalf("SetClusterDNS wrote a file it cannot read: %v\n%s", err, out)
		}
		if !slices.Equal(cfg.ClusterDNS, []string{server}) {
			t.Fatalf("clusterDNS %q, want [%q]\n%s", cfg.ClusterDNS, server, out)
		}
	})
}
