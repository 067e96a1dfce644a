package tunnelsync

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestPatientListWatch: an outage is retried within the call until the
// apiserver answers; any other answer reaches the reflector at once.
func TestPatientListWatch(t *testing.T) {
	refused := connectionRefused()
	cms := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name      string
		errs      []error // one per call, then success
		wantCalls int
		wantErr   bool
	}{
		{"answers at once", nil, 1, false},
		{"refused three times then answers", []error{refused, refused, refused}, 4, false},
		{"starting apiserver: 503, 429, 504", []error{apierrors.NewServiceUnavailable("starting"), apierrors.NewTooManyRequests("busy", 0), apierrors.NewTimeoutError("slow", 0)}, 4, false},
		{"forbidden goes to the reflector", []error{apierrors.NewForbidden(cms, "x", errors.New("RBAC"))}, 1, true},
		{"gone goes to the reflector", []error{apierrors.NewResourceExpired("too old")}, 1, true},
		{"refused, then forbidden", []error{refused, apierrors.NewForbidden(cms, "x", errors.New("RBAC"))}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, call := range []string{"list", "watch"} {
				fake := &failingListWatch{errs: tc.errs}
				p := patientListWatch{lw: fake, log: logr.Discard()}
				var err error
				if call == "list" {
					_, err = p.ListWithContext(context.Background(), metav1.ListOptions{})
				} else {
					_, err = p.WatchWithContext(context.Background(), metav1.ListOptions{})
				}
				if (err != nil) != tc.wantErr || fake.calls != tc.wantCalls {
					t.Errorf("%s: err %v after %d calls, want error %t after %d", call, err, fake.calls, tc.wantErr, tc.wantCalls)
				}
			}
		})
	}
}

// TestPatientListWatchStops: a process that stops during an outage does
// not wait for the apiserver.
func TestPatientListWatchStops(t *testing.T) {
	fake := &failingListWatch{errs: make([]error, 1000)}
	for i := range fake.errs {
		fake.errs[i] = connectionRefused()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := patientListWatch{lw: fake, log: logr.Discard()}.ListWithContext(ctx, metav1.ListOptions{})
	if err == nil || time.Since(start) > time.Second {
		t.Errorf("err %v after %s, want the outage's error soon after the context ended", err, time.Since(start))
	}
}

// failingListWatch returns errs, one per call, then answers.
type failingListWatch struct {
	errs  []error
	calls int
}

var _ toolscache.ListerWatcherWithContext = (*failingListWatch)(nil)

func (f *failingListWatch) next() error {
	f.calls++
	if f.calls <= len(f.errs) {
		return f.errs[f.calls-1]
	}
	return nil
}

func (f *failingListWatch) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return &corev1.ConfigMapList{}, nil
}

func (f *failingListWatch) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	if err := f.next(); err != nil {
		return nil, err
	}
	return watch.NewFake(), nil
}

// connectionRefused is a dial's error as client-go returns it: no answer
// of the apiserver.
func connectionRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}
