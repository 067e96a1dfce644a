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
