package tunnelsync

import (
	"context"
	"fmt"
	gosync "sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
	ctrlleader "sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Leader election, and why not controller-runtime's.
//
// controller-runtime's manager exits when its leader elector stops leading
// (and a process that exits on every kube-apiserver restart crash-loops
// through a kubeadm upgrade); its reconcilers run on the manager's context,
// which is cancelled only after client-go has tried to release the Lease,
// for up to the renew deadline more. A new manager per term would tear
// down the caches (a relist of every Node), the probe and metrics servers
// (a probe gap, a port to bind again) and take a new identity, which must
// wait a whole lease duration for its own old Lease.
//
// So the manager runs without leader election: caches, the node store,
// the controllers, probes and metrics run on every replica, all the time,
// and a campaign (client-go's elector, run again after every lost term,
// with one identity per process) gives the writers the context of the
// current term. Reconciles go through leadership.gate: while this replica
// does not lead they do nothing, and each runs with the term's context.
//
// Never two writers: a term's context is cancelled renewDeadline after the
// send of the last Lease write that made or kept this replica the holder
// (fence), and every write checks it (writeConflictSafe). Another replica
// takes the Lease only after it has seen it unchanged for leaseDuration on
// its own clock, which starts after that write was sent. The gap
// (leaseDuration - renewDeadline, 5 s by default) covers a write already
// on the wire and clock rate skew: only elapsed time on each replica's own
// monotonic clock counts, never the wall clock, so an offset between nodes
// does not matter, and a standby's clock may run up to
// leaseDuration/renewDeadline (1.5x) fast. A write stalled in the
// apiserver past that is still no lost update: every write carries the
// resourceVersion it read, and the new leader's watch brings the object
// back to its computed state. Lease writes are themselves conditional on
// the resourceVersion, so a replica that finds itself still the holder
// after an outage renews at once, and one that lost it cannot take it back.

// leadership says whether this replica leads, and runs the term's start.
type leadership struct {
	// mu is held shared by each gated reconcile for its whole run, and
	// exclusively to begin or end a term: a term begins, and the Lease is
	// released, only after the reconciles of the one before returned.
	mu   gosync.RWMutex
	term context.Context // the current term's; done or nil: not leading
	// starts run at the start of each term, under mu, in order: the
	// reconcilers forget the last term, then their full syncs are queued.
	starts []func()
}

// begin starts a term, unless it already ended.
func (l *leadership) begin(term context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if term.Err() != nil {
		return
	}
	l.term = term
	for _, start := range l.starts {
		start()
	}
}

// end waits for the reconciles in flight (their term is over) to return.
func (l *leadership) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.term = nil
}

// atStart runs start at the start of every term.
func (l *leadership) atStart(start func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts = append(l.starts, start)
}

// gate runs rec only while this replica leads, with a context that is
// cancelled when the term ends, and keeps the term from ending (and the
// next from beginning) until it returns. A request while not leading is
// dropped: each term starts with full syncs (queueAtStart).
func (l *leadership) gate(rec reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		l.mu.RLock()
		defer l.mu.RUnlock()
		if l.term == nil || l.term.Err() != nil {
			return reconcile.Result{}, nil
		}
		ctx, cancel := context.WithCancel(ctx) // keeps the controller's logger
		defer cancel()
		defer context.AfterFunc(l.term, cancel)()
		return rec.Reconcile(ctx, req)
	})
}

// queueAtStart is a source of a controller: it queues req at the start of
// every term (and at once when one is on), so a new leader checks
// everything whatever happened before.
func (l *leadership) queueAtStart(req reconcile.Request) source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.starts = append(l.starts, func() { q.Add(req) })
		if l.term != nil && l.term.Err() == nil {
			q.Add(req)
		}
		return nil
	})
}

// alwaysLeading is the runnable of --leader-elect=false: one term, the
// process's life.
type alwaysLeading struct{ lead *leadership }

func (a alwaysLeading) Start(ctx context.Context) error {
	a.lead.begin(ctx)
	<-ctx.Done()
	a.lead.end()
	return nil
}

// campaign is the runnable of leader election: it campaigns for the Lease
// until the process stops, a new term after every lost one, and releases
// the Lease at the end once every write has returned.
type campaign struct {
	lock                                      *renewClock
	name                                      string
	leaseDuration, renewDeadline, retryPeriod time.Duration
	lead                                      *leadership
	log                                       logr.Logger
}

// newCampaign is the campaign for the Lease namespace/name, through a
// client of its own (controller-runtime's: user agent "leader-election", a
// request timeout of half the renew deadline so one hung request does not
// cost the term). Events about the Lease go through recorders.
func newCampaign(cfg *rest.Config, recorders manager.Manager, namespace string, opts ManagerOptions, lead *leadership) (*campaign, error) {
	lock, err := ctrlleader.NewResourceLock(cfg, recorders, ctrlleader.Options{
		LeaderElection: true, LeaderElectionNamespace: namespace, LeaderElectionID: opts.LeaderElectionID, RenewDeadline: opts.RenewDeadline,
	})
	if err != nil {
		return nil, err
	}
	return &campaign{
		lock: &renewClock{Interface: lock}, name: opts.LeaderElectionID,
		leaseDuration: opts.LeaseDuration, renewDeadline: opts.RenewDeadline, retryPeriod: opts.RetryPeriod,
		lead: lead, log: recorders.GetLogger().WithName("leader-election"),
	}, nil
}

// Start implements manager.Runnable.
func (c *campaign) Start(ctx context.Context) error {
	c.log.Info("Campaigning for the Lease", "lease", c.lock.Describe(), "identity", c.lock.Identity())
	for ctx.Err() == nil {
		if err := c.runTerm(ctx); err != nil {
			return err
		}
	}
	c.lead.end()
	c.release()
	return nil
}

// runTerm campaigns until this replica leads, then leads until the term
// ends: the fence cuts it, client-go gives up renewing, or ctx ends. A
// new elector each time: it starts from what the Lease says, so it takes
// its own unexpired Lease back at once (conditionally on its
// resourceVersion) and waits out another holder's.
func (c *campaign) runTerm(ctx context.Context) error {
	termCtx, cut := context.WithCancel(ctx)
	defer cut()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: c.lock, Name: c.name,
		LeaseDuration: c.leaseDuration, RenewDeadline: c.renewDeadline, RetryPeriod: c.retryPeriod,
		// Released by Start once the writes have returned; client-go's
		// release would run before the term's context is cancelled.
		ReleaseOnCancel: false,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(term context.Context) {
				c.lead.begin(term)
				c.log.Info("Leading: writing the records", "identity", c.lock.Identity())
				c.fence(term, cut)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	elector.Run(termCtx) // returns when the term ends, or ctx
	if ctx.Err() == nil {
		c.log.Info("Lost the Lease: writes stopped; campaigning again in this process",
			"lease", c.lock.Describe(), "sinceLastRenewal", time.Since(c.lock.renewed()).Round(time.Millisecond))
	}
	return nil
}

// fence ends the term (cancel) renewDeadline after the send of the last
// Lease write that kept this replica the holder, checking again after
// every renewal, until the term ends by itself.
func (c *campaign) fence(term context.Context, cancel context.CancelFunc) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wait := time.Until(c.lock.renewed().Add(c.renewDeadline))
		if wait <= 0 {
			c.log.Info("Lease not renewed within the renew deadline: stopping writes now", "renewDeadline", c.renewDeadline)
			cancel()
			return
		}
		timer.Reset(wait)
		select {
		case <-term.Done():
			return
		case <-timer.C:
		}
	}
}

// release gives the Lease up when this replica still holds it, so a
// standby takes over at its next retry instead of after the lease
// duration. The update is conditional on the resourceVersion read.
func (c *campaign) release() {
	ctx, cancel := context.WithTimeout(context.Background(), c.renewDeadline)
	defer cancel()
	record, _, err := c.lock.Get(ctx)
	if err != nil || record.HolderIdentity != c.lock.Identity() {
		return
	}
	now := metav1.Now()
	err = c.lock.Interface.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now, LeaderTransitions: record.LeaderTransitions,
	})
	if err != nil {
		c.log.Error(err, "Releasing the Lease; a standby takes over after the lease duration", "lease", c.lock.Describe())
		return
	}
	c.log.Info("Released the Lease", "lease", c.lock.Describe())
}

// renewClock is the Lease lock, noting when each write that made or kept
// this replica the holder was sent: the fence counts from it.
type renewClock struct {
	resourcelock.Interface
	mu   gosync.Mutex
	sent time.Time
}

// Create implements resourcelock.Interface.
func (l *renewClock) Create(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	return l.note(record, func() error { return l.Interface.Create(ctx, record) })
}

// Update implements resourcelock.Interface.
func (l *renewClock) Update(ctx context.Context, record resourcelock.LeaderElectionRecord) error {
	return l.note(record, func() error { return l.Interface.Update(ctx, record) })
}

func (l *renewClock) note(record resourcelock.LeaderElectionRecord, write func() error) error {
	sent := time.Now() // with its monotonic reading: wall clock steps do not move the fence
	err := write()
	if err == nil && record.HolderIdentity == l.Identity() {
		l.mu.Lock()
		l.sent = sent
		l.mu.Unlock()
	}
	return err
}

// renewed is when the last write that kept this replica the holder was sent.
func (l *renewClock) renewed() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}
