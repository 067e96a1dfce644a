package e2e

import (
	"github.com/yurtdns/yurtdns/internal/install/steps"
	"github.com/yurtdns/yurtdns/internal/layout"
)

// layoutSteps are the steps install runs under the layout without an
// opt-in flag, in order (the layouts are the shipped ones: an error is a
// bug of the test).
func layoutSteps(name string) []string {
	l, err := layout.Named(name)
	if err != nil {
		panic(err)
	}
	own, _, err := steps.StepNames(l)
	if err != nil {
		panic(err)
	}
	return own
}
