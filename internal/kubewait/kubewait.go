package kubewait

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// PollInterval is how often a wait looks again.
const PollInterval = 200 * time.Millisecond

// authStartupGrace is how long a 401/403 is taken for an apiserver still
// starting up rather than an answer (a variable for the unit test).
var authStartupGrace = 20 * time.Second

// Condition reports whether the awaited state is reached, and if not, how
// far it is (for the error on timeout).
type Condition func(ctx context.Context) (done bool, progress string, err error)

// For polls cond until it is done, for at most timeout. Errors that mean
// the apiserver is away (restarting) are waited out; any other ends the
// wait. The error on timeout is "<what> after <timeout> (<last progress>)".
func For(ctx context.Context, timeout time.Duration, what string, cond Condition) error {
	var last string
	var deniedSince time.Time
	// Said once per wait, on stderr: a wait that looks hung is the apiserver's.
	said := false
	sayWaiting := func(err error) {
		if !said {
			said = true
			klog.InfoS("Waiting for the apiserver", "wait", what, "timeout", timeout, "err", err)
		}
	}
	// The calls get ctx, not the poll's deadline: a call cut short by the
	// deadline (or by the client's rate limiter foreseeing it) is a timeout,
	// which the poll reports, not an error of the call.
	err := wait.PollUntilContextTimeout(ctx, PollInterval, timeout, true, func(context.Context) (bool, error) {
		done, progress, err := cond(ctx)
		if err != nil && APIServerAway(err) {
			last = "apiserver unreachable: " + err.Error()
			sayWaiting(err)
			return false, nil
		}
		if err != nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
			// Seen on a real cluster: kube-apiserver just restarted by the
			// control-plane step denied the admin for a moment (its RBAC
			// caches not yet synced). Denied for longer is the answer.
			if deniedSince.IsZero() {
				deniedSince = time.Now()
			}
			if time.Since(deniedSince) < authStartupGrace {
				last = "apiserver starting: " + err.Error()
				sayWaiting(err)
				return false, nil
			}
		} else {
			deniedSince = time.Time{}
		}
		last = progress
		return done, err
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case wait.Interrupted(err):
		if last == "" {
			return fmt.Errorf("%s after %s", what, timeout)
		}
		return fmt.Errorf("%s after %s (%s)", what, timeout, last)
	}
	return err
}

// RetryWhileAway runs call until it succeeds or fails for another reason
// than the apiserver being away, for at most timeout: a write right after
// kube-apiserver restarted waits for it to be back. Its error starts with
// what, once: callers do not wrap it again.
func RetryWhileAway(ctx context.Context, timeout time.Duration, what string, call func(context.Context) error) error {
	var lastErr error
	err := For(ctx, timeout, what, func(ctx context.Context) (bool, string, error) {
		lastErr = call(ctx)
		return lastErr == nil, "", lastErr
	})
	switch {
	case err == nil:
		return nil
	case lastErr != nil && APIServerAway(lastErr):
		return fmt.Errorf("%s: apiserver not back after %s: %w", what, timeout, lastErr)
	case err == lastErr:
		return fmt.Errorf("%s: %w", what, err) // call's answer
	}
	return err // cancelled, or For's timeout error, which names what
}

// APIServerAway reports errors of an apiserver that is down, restarting or
// not ready yet, as opposed to an answer.
func APIServerAway(err error) bool {
	var netErr net.Error
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || (errors.As(err, &netErr) && netErr.Timeout())
}

func PodReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
