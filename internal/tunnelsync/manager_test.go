package tunnelsync

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

func TestManagerOptionsValidate(t *testing.T) {
	valid := ManagerOptions{QPS: 100, Burst: 200, LeaderElect: true, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	for _, tc := range []struct {
		name    string
		mutate  func(*ManagerOptions)
		wantErr string
	}{
		{"defaults", func(*ManagerOptions) {}, ""},
		{"no leader election ignores timings", func(o *ManagerOptions) { *o = ManagerOptions{QPS: 1, Burst: 1} }, ""},
		{"no QPS", func(o *ManagerOptions) { o.QPS = 0 }, "--kube-api-qps (0) and --kube-api-burst (200) must be positive"},
		{"zero retry period", func(o *ManagerOptions) { o.RetryPeriod = 0 }, "--leader-elect-retry-period (0s) must be positive"},
		{"negative lease", func(o *ManagerOptions) { o.LeaseDuration = -time.Second }, "--leader-elect-lease-duration (-1s) must be positive"},
		{"renew not shorter than lease", func(o *ManagerOptions) { o.RenewDeadline = o.LeaseDuration }, "must be longer than --leader-elect-renew-deadline"},
		{"no room to retry", func(o *ManagerOptions) { o.RetryPeriod = 9 * time.Second }, "must be longer than 1.2 × --leader-elect-retry-period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid
			tc.mutate(&o)
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestRESTMapperScopes: the caches ask the scope of each kind and of its
// list (a cache over several namespaces, before every List), with no
// discovery to fall back on.
func TestRESTMapperScopes(t *testing.T) {
	for _, tc := range []struct {
		kind       string
		namespaced bool
	}{
		{"Service", true}, {"ServiceList", true},
		{"ConfigMap", true}, {"ConfigMapList", true},
		{"Node", false}, {"NodeList", false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			namespaced, err := apiutil.IsGVKNamespaced(corev1.SchemeGroupVersion.WithKind(tc.kind), restMapper())
			if err != nil {
				t.Fatal(err)
			}
			if namespaced != tc.namespaced {
				t.Errorf("namespaced: %t, want %t", namespaced, tc.namespaced)
			}
		})
	}
}
