package install

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The verdict: any drift wins; without it, no step recorded applied is
// not installed, whatever the cluster shows; node names resolving wrong
// are drift.
func TestStatusVerdict(t *testing.T) {
	applied := engine.StatusReport{Step: "a", Status: engine.Applied, Recorded: true}
	skipped := engine.StatusReport{Step: "b", Status: engine.NotApplied, Detail: "skipped by install: x"}
	drifted := engine.StatusReport{Step: "c", Status: engine.Drifted, Recorded: true}
	liveOnly := engine.StatusReport{Step: "d", Status: engine.Applied}
	for _, c := range []struct {
		steps []engine.StatusReport
		wrong []int
		want  Result
	}{
		{steps: []engine.StatusReport{applied, skipped}, want: ResultApplied},
		{steps: []engine.StatusReport{applied, drifted}, want: ResultDrifted},
		{steps: []engine.StatusReport{skipped, liveOnly}, want: ResultNotInstalled},
		{steps: nil, want: ResultNotInstalled},
		{steps: []engine.StatusReport{applied}, wrong: []int{0, 0}, want: ResultApplied},
		{steps: []engine.StatusReport{applied}, wrong: []int{0, 2}, want: ResultDrifted},
		{steps: []engine.StatusReport{skipped}, wrong: []int{1}, want: ResultDrifted},
	} {
		r := Report{Steps: c.steps, Result: verdict(c.steps)}
		for _, n := range c.wrong {
			r.AddWrongNodeNames(n)
		}
		if r.Result != c.want {
			t.Errorf("%+v, wrong names %v: %s, want %s", c.steps, c.wrong, r.Result, c.want)
		}
		if total := 0; c.wrong != nil {
			for _, n := range c.wrong {
				total += n
			}
			if r.NodeNamesWrong == nil || *r.NodeNamesWrong != total {
				t.Errorf("wrong names %v counted as %v", c.wrong, r.NodeNamesWrong)
			}
		}
	}
}

// The profile comes from the install state when --profile is not given; a
// --profile that differs is refused; without a state --profile (else the
// default) is used, by name.
func TestResolveProfile(t *testing.T) {
	state := func(profile string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: engine.StateConfigMap,
			Annotations: map[string]string{engine.ProfileAnnotation: profile}}}
	}
	for _, c := range []struct {
		state      *corev1.ConfigMap
		given      string
		want, fail string
	}{
		{state: nil, given: "", want: layout.YurtTunnel},
		{state: nil, given: layout.Raven, want: layout.Raven},
		{state: state(layout.Raven), given: "", want: layout.Raven},
		{state: state(layout.Raven), given: layout.Raven, want: layout.Raven},
		{state: state(layout.Raven), given: layout.YurtTunnel, fail: "--profile yurt-tunnel: the install state (ConfigMap kube-system/yurtdns-install-state) records --profile raven"},
		// Written before the profile was recorded: the runner checks its steps.
		{state: state(""), given: "", want: layout.YurtTunnel},
		{state: nil, given: "nope", fail: `--profile "nope"`},
	} {
		b := fake.NewClientBuilder()
		if c.state != nil {
			b = b.WithObjects(c.state)
		}
		env := &engine.Env{Client: b.Build(), Options: engine.Options{Profile: c.given, Timeout: time.Second}}
		err := ResolveProfile(context.Background(), env)
		switch {
		case c.fail != "":
			if err == nil || !strings.Contains(err.Error(), c.fail) {
				t.Errorf("state %v, --profile %q: %v, want an error with %q", c.state != nil, c.given, err, c.fail)
			}
		case err != nil || env.Options.Profile != c.want:
			t.Errorf("state %v, --profile %q: %q (%v), want %q", c.state != nil, c.given, env.Options.Profile, err, c.want)
		}
	}
}
