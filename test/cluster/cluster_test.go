package cluster

import (
	"strings"
	"testing"
)

func TestKubeadmFlags(t *testing.T) {
	for env, want := range map[string]string{
		"KUBELET_KUBEADM_ARGS=\"--node-ip=198.51.100.10 --pod-infra-container-image=p:1\"\n": "--node-ip=198.51.100.10|--pod-infra-container-image=p:1",
		"# comment\nKUBELET_KUBEADM_ARGS=\"\"\n":                                             "",
		"":                                                                                   "",
	} {
		if got := strings.Join(kubeadmFlags(env), "|"); got != want {
			t.Errorf("kubeadmFlags(%q) = %q, want %q", env, got, want)
		}
	}
}
