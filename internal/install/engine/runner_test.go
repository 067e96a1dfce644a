package engine

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A step's preflight refuses the cluster before any step runs, and only
// when that step is to run: not when it is skipped or not asked for.
func TestStepPreflightRunsBeforeEveryStep(t *testing.T) {
	refused := errors.New("no")
	for _, tc := range []struct {
		name    string
		options Options
		wantErr bool
		ran     []string
	}{
		{"asked for", Options{NodeLocalDNS: true}, true, nil},
		{"not asked for", Options{}, false, []string{"first"}},
		{"skipped", Options{NodeLocalDNS: true, Skip: []string{"opt-in"}}, false, []string{"first"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran []string
			step := func(name string) Step {
				return Step{Name: name, Install: func(context.Context, *Env, *StepState) (Result, error) {
					ran = append(ran, name)
					return Result{Summary: "done"}, nil
				}}
			}
			optIn := step("opt-in")
			optIn.OptIn, optIn.Enabled = "--node-local-dns", func(o Options) bool { return o.NodeLocalDNS }
			optIn.Preflight = func(context.Context, *Env) error { return refused }
			r := Runner{Steps: []Step{step("first"), optIn},
				Preflight: func(context.Context, *Env, io.Writer) error { return nil }}
			tc.options.Timeout = time.Second
			env := &Env{Client: fake.NewClientBuilder().Build(), Options: tc.options}
			err := r.Install(context.Background(), env, io.Discard)
			if errors.Is(err, refused) != tc.wantErr || !slices.Equal(ran, tc.ran) {
				t.Errorf("Install: %v, steps run %v; want refused %v, run %v", err, ran, tc.wantErr, tc.ran)
			}
		})
	}
}

// A step --skip names, or one that skips itself saying what applies it, is
// recorded skipped, and status says so and how to apply it; a skip without
// that (not for this cluster) records nothing, and clears an earlier skip's
// hint. A step applied earlier stays applied when skipped; a skip taken
// for applied by an older install is undone.
func TestSkippedStepsAreRecorded(t *testing.T) {
	notApplied := func(context.Context, *Env, *StepState) (StepStatus, string, error) { return NotApplied, "missing", nil }
	step := func(name string, res Result) Step {
		return Step{Name: name, Status: notApplied, Install: func(context.Context, *Env, *StepState) (Result, error) { return res, nil }}
	}
	r := Runner{Steps: []Step{
		step("by-flag", Result{Summary: "done"}),
		step("needs-flag", Result{Skipped: true, Summary: "skipped: no --x", ApplyWith: "install --x"}),
		step("not-here", Result{Skipped: true, Summary: "skipped: no CRD"}),
		step("applied", Result{Summary: "done"}),
	}, Preflight: func(context.Context, *Env, io.Writer) error { return nil }}
	ctx := context.Background()
	env := &Env{Client: fake.NewClientBuilder().Build(), Options: Options{Timeout: time.Second, Skip: []string{"by-flag", "not-here"}}}
	if err := r.Install(ctx, env, io.Discard); err != nil {
		t.Fatal(err)
	}
	// An older install's record of needs-flag as applied, with nothing it changed.
	st, err := loadState(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	st.step("needs-flag").Applied, st.step("needs-flag").Skipped = true, ""
	if err := st.persist(ctx); err != nil {
		t.Fatal(err)
	}
	env.Options.Skip = []string{"by-flag", "applied"}
	if err := r.Install(ctx, env, io.Discard); err != nil {
		t.Fatal(err)
	}
	reports, err := r.Status(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	want := []StatusReport{
		{Step: "by-flag", Status: Skipped, Detail: "the last install skipped it; to apply it: install without --skip by-flag"},
		{Step: "needs-flag", Status: Skipped, Detail: "the last install skipped it; to apply it: install --x"},
		{Step: "not-here", Status: NotApplied, Detail: "missing"},
		{Step: "applied", Status: NotApplied, Detail: "missing", Recorded: true},
	}
	if !slices.Equal(reports, want) {
		t.Errorf("status:\n%+v\nwant\n%+v", reports, want)
	}
}
