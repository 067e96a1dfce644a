package tunnelsync

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestLeadershipGate(t *testing.T) {
	l := &leadership{}
	ran := 0
	gated := l.gate(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		ran++
		return reconcile.Result{}, nil
	}))
	term, endTerm := context.WithCancel(context.Background())
	defer endTerm()
	ended, endEnded := context.WithCancel(context.Background())
	endEnded()
	for _, tc := range []struct {
		name    string
		step    func()
		wantRan int // reconciles run so far, one tried per step
	}{
		{"before any term: dropped", func() {}, 0},
		{"in a term: runs", func() { l.begin(term) }, 1},
		{"after the term's end: dropped", endTerm, 1},
		{"a term that ended before it began: dropped", func() { l.begin(ended) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.step()
			if _, err := gated.Reconcile(context.Background(), syncRequest); err != nil {
				t.Fatal(err)
			}
			if ran != tc.wantRan {
				t.Errorf("%d reconciles ran, want %d", ran, tc.wantRan)
			}
		})
	}
}

// A reconcile in flight sees its context cancelled the moment its term
// ends, and the next term begins only after it returned.
func TestLeadershipTermEndCancelsWrites(t *testing.T) {
	l := &leadership{}
	term, end := context.WithCancel(context.Background())
	l.begin(term)
	inFlight, returned := make(chan struct{}), make(chan time.Time, 1)
	gated := l.gate(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		close(inFlight)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // a write returning late
		returned <- time.Now()
		return reconcile.Result{}, ctx.Err()
	}))
	errc := make(chan error, 1)
	go func() {
		_, err := gated.Reconcile(context.Background(), syncRequest)
		errc <- err
	}()
	<-inFlight
	end()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("reconcile after the term ended: %v, want context.Canceled", err)
	}
	began := make(chan time.Time, 1)
	next, endNext := context.WithCancel(context.Background())
	defer endNext()
	l.atStart(func() { began <- time.Now() })
	l.begin(next)
	if b, r := <-began, <-returned; b.Before(r) {
		t.Errorf("the next term began %s before the last term's reconcile returned", r.Sub(b))
	}
}

// Each term queues its full sync at its start: a new leader checks
// everything, whatever it dropped while not leading.
func TestLeadershipQueueAtStart(t *testing.T) {
	l := &leadership{}
	var reset int
	l.atStart(func() { reset++ })
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := l.queueAtStart(syncRequest).Start(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if q.Len() != 0 {
		t.Fatalf("queued %d before any term", q.Len())
	}
	for term := 1; term <= 2; term++ {
		ctx, end := context.WithCancel(context.Background())
		l.begin(ctx)
		if q.Len() != 1 || reset != term {
			t.Errorf("term %d: %d queued, %d resets; want 1 queued, %d resets", term, q.Len(), reset, term)
		}
		item, _ := q.Get()
		q.Done(item)
		end()
	}
}

// fakeLock is a Lease lock held in memory.
type fakeLock struct {
	mu       sync.Mutex
	identity string
	record   resourcelock.LeaderElectionRecord
	updates  int
}

func (f *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.record
	return &r, nil, nil
}

func (f *fakeLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return f.Update(ctx, r)
}

func (f *fakeLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record = r
	f.updates++
	return nil
}

func (f *fakeLock) RecordEvent(string) {}
func (f *fakeLock) Identity() string   { return f.identity }
func (f *fakeLock) Describe() string   { return "kube-system/test" }
func (f *fakeLock) holder() string     { r, _, _ := f.Get(context.Background()); return r.HolderIdentity }
func (f *fakeLock) updateCount() int   { f.mu.Lock(); defer f.mu.Unlock(); return f.updates }
func (f *fakeLock) setHolder(h string) { f.mu.Lock(); defer f.mu.Unlock(); f.record.HolderIdentity = h }

// The fence ends a term renewDeadline after the send of the last write
// that kept this replica the holder; renewals push it back; another
// holder's writes do not.
func TestFenceEndsTermAfterRenewDeadline(t *testing.T) {
	const renewDeadline = 300 * time.Millisecond
	for _, tc := range []struct {
		name     string
		renewals int    // renewals 100 ms apart after the term starts
		holder   string // who renews
		minTerm  time.Duration
	}{
		{"no renewal", 0, "me", renewDeadline},
		{"renewed", 5, "me", 500*time.Millisecond + renewDeadline},
		{"another holder's writes", 5, "other", renewDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &fakeLock{identity: "me"}
			c := &campaign{lock: &renewClock{Interface: inner}, renewDeadline: renewDeadline, log: logr.Discard()}
			if err := c.lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			term, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				for range tc.renewals {
					time.Sleep(100 * time.Millisecond)
					_ = c.lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: tc.holder})
				}
			}()
			c.fence(term, cancel)
			lasted := time.Since(start)
			if term.Err() == nil {
				t.Fatal("the fence returned without ending the term")
			}
			if lasted < tc.minTerm || lasted > tc.minTerm+200*time.Millisecond {
				t.Errorf("the term lasted %s, want %s (+ scheduling)", lasted, tc.minTerm)
			}
		})
	}
}

// release gives up the Lease only while this replica holds it.
func TestReleaseOnlyOwnLease(t *testing.T) {
	for _, tc := range []struct {
		holder, wantHolder string
		wantUpdates        int
	}{
		{"me", "", 1},
		{"other", "other", 0},
		{"", "", 0},
	} {
		t.Run("held by "+tc.holder, func(t *testing.T) {
			inner := &fakeLock{identity: "me"}
			inner.setHolder(tc.holder)
			c := &campaign{lock: &renewClock{Interface: inner}, renewDeadline: time.Second, log: logr.Discard()}
			c.release()
			if inner.holder() != tc.wantHolder || inner.updateCount() != tc.wantUpdates {
				t.Errorf("after release: holder %q, %d updates; want %q, %d", inner.holder(), inner.updateCount(), tc.wantHolder, tc.wantUpdates)
			}
		})
	}
}
