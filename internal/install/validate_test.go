package install

import (
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
)

// ValidateFlags refuses each bad value naming the valid ones, and lets
// through a --skip of any profile's steps when --profile is not given (the
// recorded profile is not known before the apiserver is asked).
func TestValidateFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    engine.Options
		want string // "" accepted
	}{
		{"defaults", engine.Options{}, ""},
		{"skip of yurt-tunnel, no profile", engine.Options{Skip: []string{"control-plane", "node-local-dns"}}, ""},
		{"skip of raven, no profile", engine.Options{Skip: []string{"raven-sync"}}, ""},
		{"skip of raven, profile raven", engine.Options{Profile: "raven", Skip: []string{"raven-sync"}}, ""},
		{"skip of yurt-tunnel, profile raven", engine.Options{Profile: "raven", Skip: []string{"rbac"}},
			`--skip "rbac": no such step of --profile raven (its steps: records,raven-rbac,raven-corefile,raven-proxy-dns,gateway-dns,raven-sync,monitoring,node-local-dns)`},
		{"unknown step", engine.Options{Skip: []string{"bogus"}}, `--skip "bogus": no such step of --profile yurt-tunnel (its steps: records,`},
		{"steps of two profiles", engine.Options{Skip: []string{"rbac", "raven-rbac"}}, `no such step of --profile raven`},
		{"profile", engine.Options{Profile: "foo"}, `--profile "foo": must be one of yurt-tunnel, raven`},
		{"kcm-nodelifecycle", engine.Options{NodeLifecycle: "bogus"}, `--kcm-nodelifecycle "bogus": must be one of auto, disable, keep`},
		{"kcm-nodelifecycle auto", engine.Options{NodeLifecycle: "auto"}, ""},
		{"negative timeout", engine.Options{Timeout: -time.Second}, "--timeout -1s: must be 0 or more"},
		{"servicemonitor", engine.Options{KubeletServiceMonitor: "kubelet"}, `ServiceMonitor "kubelet": want NAMESPACE/NAME`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateFlags(tc.o)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("ValidateFlags: %v, want %q", err, tc.want)
			}
		})
	}
}
