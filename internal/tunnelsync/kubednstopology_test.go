package tunnelsync

import (
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
)

// TestTopologyDrift: the keeper patches exactly when the annotation is
// missing or holds another value, and says which.
func TestTopologyDrift(t *testing.T) {
	const want = "openyurt.io/nodepool"
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		drift       string
	}{
		{"no annotations at all (kubeadm's template)", nil, "missing"},
		{"others only", map[string]string{"prometheus.io/scrape": "true"}, "missing"},
		{"kept", map[string]string{tunnelnodes.TopologyKeysAnnotation: want, "prometheus.io/scrape": "true"}, ""},
		{"another value", map[string]string{tunnelnodes.TopologyKeysAnnotation: "kubernetes.io/hostname"}, `"kubernetes.io/hostname"`},
		{"emptied", map[string]string{tunnelnodes.TopologyKeysAnnotation: ""}, `""`},
		{"the key in another case is another key", map[string]string{"openyurt.io/topologykeys": want}, "missing"},
	} {
		if got := topologyDrift(tc.annotations, want); got != tc.drift {
			t.Errorf("%s: drift %q, want %q", tc.name, got, tc.drift)
		}
	}
}
