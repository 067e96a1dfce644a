package e2e

import "github.com/yurtdns/yurtdns/internal/install"

// layoutSteps are the steps install runs under the layout without an
// opt-in flag, in order (the layouts are the shipped ones: an unknown name
// is a bug of the test).
func layoutSteps(name string) []string {
	steps, err := install.LayoutStepNames(name)
	if err != nil {
		panic(err)
	}
	return steps
}
