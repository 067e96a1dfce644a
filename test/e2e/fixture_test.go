package e2e

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/yurtdns/yurtdns/test/harness"
)

// TestMain tears down the fixtures top-level tests share that are still up
// once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	fixtureCleanups.run()
	os.Exit(code)
}

// shared is a fixture several top-level tests share (a control plane and
// the servers on it): built by the first of them that runs, with build, and
// torn down by close (the last of them calls it), or else after the
// package's last test. A build that fails fails the test that asked, and
// every later one that asks.
type shared[F any] struct {
	build func(tb harness.TB) F

	mu       sync.Mutex
	built    bool
	failed   bool
	f        F
	cleanups cleanups
}

// get is the fixture, built now if no test has built it yet.
func (s *shared[F]) get(t *testing.T) F {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.built && !s.failed {
		s.failed = true // until build returns
		fixtureCleanups.add(s.close)
		tb := &fixtureTB{building: t, cleanups: &s.cleanups}
		defer tb.done()
		s.f = s.build(tb)
		s.built, s.failed = true, false
	}
	if !s.built {
		t.Fatal("the shared fixture could not be built (see the first test that asked for it)")
	}
	return s.f
}

// close tears the fixture down now; a later get builds it again.
func (s *shared[F]) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups.run()
	var zero F
	s.f, s.built, s.failed = zero, false, false
}

// fixtureCleanups close the shared fixtures after the package's tests.
var fixtureCleanups cleanups

type cleanups struct {
	mu  sync.Mutex
	fns []func()
}

func (c *cleanups) add(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, f)
}

func (c *cleanups) run() {
	c.mu.Lock()
	fns := slices.Clone(c.fns)
	c.fns = nil
	c.mu.Unlock()
	for _, f := range slices.Backward(fns) {
		f()
	}
}

// fixtureTB is the harness.TB of a shared fixture: its cleanups wait for
// TestMain; while the fixture is built, failures and logs go to the test
// building it, afterwards to stderr.
type fixtureTB struct {
	cleanups *cleanups
	mu       sync.Mutex
	building *testing.T
	failed   bool
}

func (f *fixtureTB) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.building = nil
}

// test is the test building the fixture, nil once it is built.
func (f *fixtureTB) test() *testing.T {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.building
}

func (f *fixtureTB) Helper()           {}
func (f *fixtureTB) Cleanup(fn func()) { f.cleanups.add(fn) }

func (f *fixtureTB) TempDir() string {
	dir, err := os.MkdirTemp("", "yurtdns-e2e-fixture-")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (f *fixtureTB) Logf(format string, args ...any) {
	if t := f.test(); t != nil {
		t.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, "shared fixture: "+format+"\n", args...)
}

func (f *fixtureTB) Errorf(format string, args ...any) {
	f.fail()
	if t := f.test(); t != nil {
		t.Errorf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, "shared fixture: "+format+"\n", args...)
}

func (f *fixtureTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

// Fatalf stops the test building the fixture; afterwards (in a cleanup) it
// can only say so.
func (f *fixtureTB) Fatalf(format string, args ...any) {
	f.fail()
	if t := f.test(); t != nil {
		t.Fatalf(format, args...)
	}
	fmt.Fprintf(os.Stderr, "shared fixture: "+format+"\n", args...)
}

func (f *fixtureTB) fail() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
}

func (f *fixtureTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}
