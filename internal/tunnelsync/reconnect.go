package tunnelsync

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// reconnectBackoff is how often the sync retries a list or a watch while
// the apiserver does not answer: every 0.5–0.75 s after the first three
// tries. client-go's reflector backoff grows to 30–60 s through a long
// outage, and a change made once the apiserver is back must be written
// within seconds. Each retry while it is down is one refused connection;
// throttling (429 with Retry-After) is waited out inside client-go's REST
// client first.
var reconnectBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 4, Cap: 500 * time.Millisecond}

// patientInformers is controller-runtime's cache.Options.NewInformer: the
// shared informers of client-go, whose reflector backoff cannot be set,
// over a ListerWatcher that retries outages itself (patientListWatch), so
// that reflector never backs off for one. Without it a cache that waited
// for the apiserver since the process started synced up to a minute after
// the apiserver was back, and nothing was written until then.
func patientInformers(log logr.Logger) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		return toolscache.NewSharedIndexInformer(patientListWatch{lw: toolscache.ToListerWatcherWithContext(lw), log: log}, obj, resync, indexers)
	}
}

// patientListWatch retries, within the call, a list or a watch that failed
// for want of an apiserver (isOutage) at reconnectBackoff until one
// answers or ctx ends. Other errors (403, 410 Gone) go to the reflector
// at once, which handles them as before.
type patientListWatch struct {
	lw  toolscache.ListerWatcherWithContext
	log logr.Logger
}

// List implements toolscache.Lister.
func (p patientListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), opts)
}

// Watch implements toolscache.Watcher.
func (p patientListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.WatchWithContext(context.Background(), opts)
}

// ListWithContext implements toolscache.ListerWithContext.
func (p patientListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return untilAnswered(ctx, p.log, "list", func() (runtime.Object, error) { return p.lw.ListWithContext(ctx, opts) })
}

// WatchWithContext implements toolscache.WatcherWithContext.
func (p patientListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return untilAnswered(ctx, p.log, "watch", func() (watch.Interface, error) { return p.lw.WatchWithContext(ctx, opts) })
}

// untilAnswered calls call until it returns something other than an
// outage, or ctx ends. It logs the first failure and the answer after it,
// not every retry.
func untilAnswered[T any](ctx context.Context, log logr.Logger, what string, call func() (T, error)) (T, error) {
	backoff := reconnectBackoff
	var failedSince time.Time
	for {
		v, err := call()
		if err == nil || !isOutage(err) || ctx.Err() != nil {
			if !failedSince.IsZero() && err == nil {
				log.Info("The apiserver answered again", "request", what, "waited", time.Since(failedSince).Round(time.Millisecond))
			}
			return v, err
		}
		if failedSince.IsZero() {
			failedSince = time.Now()
			log.Info("The apiserver does not answer: retrying until it does", "request", what, "err", err.Error())
		}
		t := time.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}

// isOutage tells an apiserver that is down, starting or overloaded (no
// answer at all, 429, 503, 504) from an answer the caller must act on.
func isOutage(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // a refused or broken connection, a client timeout
	}
	return apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}
