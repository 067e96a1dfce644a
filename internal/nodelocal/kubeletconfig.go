package nodelocal

import (
	"fmt"
	"slices"

	"github.com/yurtdns/yurtdns/internal/textedit"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// KubeletConfig is the part of a KubeletConfiguration (kubeadm's
// /var/lib/kubelet/config.yaml, the kubelet-config ConfigMap's "kubelet")
// the node-local switch reads.
type KubeletConfig struct {
	ClusterDNS    []string
	ClusterDomain string
	// HealthzBindAddress and HealthzPort: where the kubelet says it is
	// healthy (its defaults when unset; port 0 is off).
	HealthzBindAddress string
	HealthzPort        int
}

// maxKubeletConfig bounds what is parsed: kubeadm's file is about 1 KiB.
const maxKubeletConfig = 1 << 20

// ParseKubeletConfig reads the fields above from a KubeletConfiguration.
func ParseKubeletConfig(data []byte) (KubeletConfig, error) {
	n, err := parseConfig(data)
	if err != nil {
		return KubeletConfig{}, err
	}
	return kubeletConfigOf(n)
}

func kubeletConfigOf(n *yaml.RNode) (KubeletConfig, error) {
	c := KubeletConfig{HealthzBindAddress: "127.0.0.1", HealthzPort: 10248}
	var err error
	c.ClusterDNS, err = stringList(n, "clusterDNS")
	if err != nil {
		return c, err
	}
	for _, f := range []struct {
		name string
		to   any
	}{{"clusterDomain", &c.ClusterDomain}, {"healthzBindAddress", &c.HealthzBindAddress}, {"healthzPort", &c.HealthzPort}} {
		v := n.Field(f.name)
		if v == nil || v.Value.IsNilOrEmpty() {
			continue
		}
		if err := v.Value.Document().Decode(f.to); err != nil {
			return c, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return c, nil
}

// SetClusterDNS returns the KubeletConfiguration with clusterDNS set to
// servers, everything else as it was (comments and order kept; the YAML's
// layout may be normalised). changed is false when clusterDNS already is
// servers, and then data comes back as it was.
func SetClusterDNS(data []byte, servers []string) (out []byte, changed bool, err error) {
	n, err := parseConfig(data)
	if err != nil {
		return nil, false, err
	}
	// A file whose fields the callers read back do not decode is not edited.
	now, err := kubeletConfigOf(n)
	if err != nil {
		return nil, false, err
	}
	if slices.Equal(now.ClusterDNS, servers) {
		return data, false, nil
	}
	if err := n.PipeE(yaml.SetField("clusterDNS", yaml.NewListRNode(servers...))); err != nil {
		return nil, false, fmt.Errorf("setting clusterDNS: %w", err)
	}
	s, err := n.String()
	if err != nil {
		return nil, false, err
	}
	// Read back before anything is written: an edit that broke the file (an
	// alias of the replaced value, say) is refused.
	if got, err := ParseKubeletConfig([]byte(s)); err != nil {
		return nil, false, fmt.Errorf("the edited kubelet configuration does not parse: %w", err)
	} else if !slices.Equal(got.ClusterDNS, servers) {
		return nil, false, fmt.Errorf("the edited kubelet configuration has clusterDNS %v, not %v", got.ClusterDNS, servers)
	}
	return []byte(s), true, nil
}

func parseConfig(data []byte) (*yaml.RNode, error) {
	return textedit.ParseKind(string(data), "KubeletConfiguration", "kubelet configuration", maxKubeletConfig)
}

func stringList(n *yaml.RNode, field string) ([]string, error) {
	f := n.Field(field)
	if f == nil || f.Value.IsNilOrEmpty() {
		return nil, nil
	}
	var list []string
	if err := f.Value.Document().Decode(&list); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return list, nil
}
