package install

import (
	"github.com/yurtdns/yurtdns/deploy"
)

// Steps are install's steps, in order; revert runs them backwards.
func Steps() []Step {
	return []Step{recordsStep(), rbacStep(), corefileStep(), corednsDaemonSetStep(), kubeDNSTopologyStep(), kubeProxyStep(), controlPlaneStep(), syncStep(), prometheusStep()}
}

// StepNames lists the steps install runs by default under yurt-tunnel.
func StepNames() []string { return ProfileStepNames(ProfileYurtTunnel) }

// ravenSteps are install's steps under Raven's L7 proxy, in order.
func ravenSteps() []Step {
	return []Step{recordsStep(), ravenRBACStep(), ravenCorefileStep(), ravenProxyDNSStep(), gatewayDNSStep(), syncStepOf("raven-sync", deploy.TunnelNodesSyncRaven)}
}
