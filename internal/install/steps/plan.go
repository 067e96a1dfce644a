package steps

import (
	"fmt"
	"sync"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
)

// The only ordered list of install's steps per layout; revert runs them
// backwards.
func init() {
	AddPlan(layout.YurtTunnel, func(l layout.Layout) []engine.Step {
		return []engine.Step{recordsStep(), rbacStep("rbac", deploy.CoreDNSRBAC), corefileStep(l), corednsDaemonSetStep(), kubeDNSTopologyStep(), kubeProxyStep(),
			controlPlaneStep(), tunnelDNSStep(), syncStep("sync", deploy.TunnelNodesSync), prometheusStep(), monitoringStep(deploy.Monitoring)}
	})
	AddPlan(layout.Raven, func(l layout.Layout) []engine.Step {
		return []engine.Step{recordsStep(), rbacStep("raven-rbac", deploy.RavenProxyDNSRBAC), ravenCorefileStep(l), ravenProxyDNSStep(), gatewayDNSStep(),
			syncStep("raven-sync", deploy.TunnelNodesSyncRaven), monitoringStep(deploy.MonitoringRaven)}
	})
}

// optIns are the steps every layout runs last, each only when its flag
// asks for it.
func optIns(l layout.Layout) []engine.Step { return []engine.Step{nodeLocalDNSStep(l)} }

var (
	plansMu sync.RWMutex
	plans   = map[string]func(layout.Layout) []engine.Step{}
)

// AddPlan sets the steps of the named layout, in order.
func AddPlan(name string, steps func(layout.Layout) []engine.Step) {
	plansMu.Lock()
	defer plansMu.Unlock()
	plans[name] = steps
}

// Plan is the layout's steps, then the opt-in ones.
func Plan(l layout.Layout) ([]engine.Step, error) {
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
