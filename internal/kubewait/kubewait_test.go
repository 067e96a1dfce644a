package kubewait

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A 403 right after kube-apiserver restarted (its RBAC caches not synced)
// is waited out; a 403 that lasts past the grace is the answer.
func TestWaitForOutlastsStartupDenials(t *testing.T) {
	ctx := context.Background()
	defer func(grace time.Duration) { authStartupGrace = grace }(authStartupGrace)
	authStartupGrace = time.Second
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "j", errors.New("RBAC: not synced"))
	calls := 0
	err := For(ctx, 5*time.Second, "job", func(context.Context) (bool, string, error) {
		calls++
		if calls < 3 {
			return false, "", denied
		}
		return true, "", nil
	})
	if err != nil {
		t.Errorf("denied twice, then done: %v", err)
	}
	start := time.Now()
	err = For(ctx, time.Minute, "job", func(context.Context) (bool, string, error) { return false, "", denied })
	if !apierrors.IsForbidden(err) || time.Since(start) < authStartupGrace || time.Since(start) > authStartupGrace+5*time.Second {
		t.Errorf("denied throughout: %v after %s; want the 403 after the %s grace", err, time.Since(start), authStartupGrace)
	}
}

// RetryWhileAway's error names what it did once, whether the apiserver
// stayed away or answered with an error: callers do not wrap it again
// (status printed "reading install state: reading install state: ...").
func TestRetryWhileAwayNamesWhatOnce(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"away", refused, "reading install state: apiserver not back after 300ms: dial tcp: connect: connection refused"},
		{"answered", notFound, `reading install state: configmaps "x" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := RetryWhileAway(context.Background(), 300*time.Millisecond, "reading install state", func(context.Context) error { return tc.err })
			if err == nil || err.Error() != tc.want || !errors.Is(err, tc.err) {
				t.Errorf("got %v, want %q wrapping the call's error", err, tc.want)
			}
		})
	}
}
