package engine

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
)

// Versions are read strictly: an unstamped build's version is an error that
// names it, never an old server.
func TestServerOlderThan(t *testing.T) {
	for v, want := range map[string]string{"v1.21.14": "true", "v1.22.0": "false", "v1.37.1": "false", "v1.30.2-gke.1234": "false",
		"v0.0.0-master+$Format:%H$": `cannot tell the apiserver's version from "v0.0.0-master+$Format:%H$"`, "v0.0.0": "cannot tell"} {
		env := &Env{serverVersion: &version.Info{GitVersion: v}}
		old, err := env.ServerOlderThan(1, 22)
		got := strconv.FormatBool(old)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("%s: %s, want %s", v, got, want)
		}
	}
}
