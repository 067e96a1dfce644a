package tunnelsync

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// write is what a mutate function of writeConflictSafe decided.
type write int

const (
	noWrite write = iota // the object is as it should be (or absent, and stays so)
	update               // write the changed object back
	create               // create the object (it was absent)
)

// writeConflictSafe brings one object to its desired state with optimistic
// concurrency, never a blind overwrite: it reads the object (a fresh one,
// found or not), lets mutate change it, and writes it with the
// resourceVersion it read. A conflict (someone wrote since the read) or a
// create race reads again — from the API, since it shows the cache lags —
// and retries with client-go's backoff. what labels the metrics
// (objectConfigMap, objectShard, objectService). It returns the write that went through.
func writeConflictSafe[O any, T interface {
	*O
	client.Object
}](ctx context.Context, r *Reconciler, what string, key types.NamespacedName, mutate func(obj T, found bool) write) (write, error) {
	var reader client.Reader = r.client
	var done write
	err := retry.OnError(retry.DefaultBackoff, retryable, func() error {
		obj := T(new(O))
		err := reader.Get(ctx, key, obj)
		reader = r.apiReader // a retry means the cache lagged
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		done = mutate(obj, err == nil)
		// ctx is the leadership term's (leadership.gate): once it ended
		// another replica may lead, and nothing more is written.
		if done != noWrite && ctx.Err() != nil {
			return fmt.Errorf("not writing %s: no longer leading: %w", key, ctx.Err())
		}
		switch done {
		case update:
			err = r.own.write(obj, func() error { return r.client.Update(ctx, obj) })
		case create:
			err = r.own.write(obj, func() error { return r.client.Create(ctx, obj) })
		default:
			return nil
		}
		if apierrors.IsConflict(err) {
			conflictsTotal.WithLabelValues(what).Inc()
		}
		if err == nil {
			writesTotal.WithLabelValues(what).Inc()
		}
		return err
	})
	return done, err
}

// retryable: a conflict (someone wrote since we read) or a create race.
func retryable(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
