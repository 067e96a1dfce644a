package engine

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A step that runs longer than the interval says so at each interval, and
// nothing is said once it returned.
func TestLongStepSaysItIsStillRunning(t *testing.T) {
	defer func(i time.Duration) { progressInterval = i }(progressInterval)
	progressInterval = 50 * time.Millisecond
	for _, tc := range []struct {
		name      string
		runs      time.Duration
		wantLines int // at least
	}{
		{"quick", 0, 0},
		{"four intervals", 4*progressInterval + progressInterval/2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out lockedBuffer
			out.Write([]byte("install\n"))
			step := Step{Name: "slow", Install: func(context.Context, *Env, *StepState) (Result, error) {
				time.Sleep(tc.runs)
				return Result{Summary: "done"}, nil
			}}
			r := Runner{Steps: []Step{step}, Preflight: func(context.Context, *Env, io.Writer) error { return nil }}
			env := &Env{Client: fake.NewClientBuilder().Build(), Options: Options{Timeout: time.Second}}
			if err := r.Install(context.Background(), env, &out); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * progressInterval) // nothing more after the step
			text := out.String()
			lines := strings.Count(text, "\n  slow: still running (")
			if lines < tc.wantLines || (tc.wantLines == 0 && lines > 0) || !strings.HasSuffix(text, "[slow] done\n") {
				t.Errorf("%d progress lines, want at least %d, and the step's line last:\n%s", lines, tc.wantLines, text)
			}
		})
	}
}

// A step that says what it is at has it on its progress lines, from then on.
func TestLongStepSaysWhatItIsAt(t *testing.T) {
	defer func(i time.Duration) { progressInterval = i }(progressInterval)
	progressInterval = 50 * time.Millisecond
	var out lockedBuffer
	step := Step{Name: "slow", Install: func(_ context.Context, _ *Env, ss *StepState) (Result, error) {
		time.Sleep(3 * progressInterval / 2)
		ss.Doing("patch Job on master-2")
		time.Sleep(3 * progressInterval)
		return Result{Summary: "done"}, nil
	}}
	r := Runner{Steps: []Step{step}, Preflight: func(context.Context, *Env, io.Writer) error { return nil }}
	env := &Env{Client: fake.NewClientBuilder().Build(), Options: Options{Timeout: time.Second}}
	if err := r.Install(context.Background(), env, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	before, _, _ := strings.Cut(text, ": patch Job on master-2\n")
	if !regexp.MustCompile(`(?m)^  slow: still running \([^)]*\)$`).MatchString(before) || strings.Contains(before, "master-2") ||
		strings.Count(text, ": patch Job on master-2\n") < 2 || !strings.HasSuffix(text, "[slow] done\n") {
		t.Errorf("want a plain progress line, then ones ending ': patch Job on master-2', then the step's line:\n%s", text)
	}
}

// Heartbeat says the elapsed time, every interval, and nothing after stop.
func TestHeartbeat(t *testing.T) {
	var mu sync.Mutex
	var said []time.Duration
	stop := Heartbeat(20*time.Millisecond, func(elapsed time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		said = append(said, elapsed)
	})
	time.Sleep(110 * time.Millisecond)
	stop()
	stop() // twice is harmless
	mu.Lock()
	n := len(said)
	mu.Unlock()
	time.Sleep(60 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n < 3 || len(said) != n {
		t.Errorf("said %d times by stop, %d after; want at least 3, and none after", n, len(said))
	}
}

// lockedBuffer is a bytes.Buffer the heartbeat's goroutine may write to.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
