package install

import (
	"fmt"
	"strings"
	"sync"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/layout"
)

// The only ordered list of install's steps per layout; revert runs them
// backwards.
func init() {
	AddPlan(layout.YurtTunnel, func(l layout.Layout) []Step {
		return []Step{recordsStep(), rbacStep(), corefileStep(l), corednsDaemonSetStep(), kubeDNSTopologyStep(), kubeProxyStep(),
			controlPlaneStep(), syncStepOf("sync", deploy.TunnelNodesSync), prometheusStep()}
	})
	AddPlan(layout.Raven, func(l layout.Layout) []Step {
		return []Step{recordsStep(), ravenRBACStep(), ravenCorefileStep(l), ravenProxyDNSStep(), gatewayDNSStep(),
			syncStepOf("raven-sync", deploy.TunnelNodesSyncRaven)}
	})
}

// optIns are the steps every layout runs last, each only when its flag
// asks for it.
func optIns(l layout.Layout) []Step { return []Step{nodeLocalDNSStep(l)} }

var (
	plansMu sync.RWMutex
	plans   = map[string]func(layout.Layout) []Step{}
)

// AddPlan sets the steps of the named layout, in order.
func AddPlan(name string, steps func(layout.Layout) []Step) {
	plansMu.Lock()
	defer plansMu.Unlock()
	plans[name] = steps
}

// Plan is the layout's steps, then the opt-in ones.
func Plan(l layout.Layout) ([]Step, error) {
	plansMu.RLock()
	steps, ok := plans[l.Name]
	plansMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("layout %s has no install steps", l.Name)
	}
	return append(steps(l), optIns(l)...), nil
}

// StepNames are the names of the layout's own steps and of the opt-in
// ones, in order.
func StepNames(l layout.Layout) (own, optIn []string, err error) {
	steps, err := Plan(l)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range steps {
		if s.OptIn != "" {
			optIn = append(optIn, s.Name+" (with "+s.OptIn+")")
			continue
		}
		own = append(own, s.Name)
	}
	return own, optIn, nil
}

// Describe lists each layout with its steps, for install's help.
func Describe() string {
	var parts []string
	for _, l := range layout.All() {
		own, optIn, err := StepNames(l)
		if err != nil {
			own = []string{err.Error()}
		}
		parts = append(parts, fmt.Sprintf("%s (%s; steps: %s; then %s)", l.Name, l.Help, strings.Join(own, ","), strings.Join(optIn, ",")))
	}
	return strings.Join(parts, " or ")
}
