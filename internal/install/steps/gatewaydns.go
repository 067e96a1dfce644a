package steps

import (
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
)

// The controller of yurt-manager that writes edge-tunnel-nodes: its
// registered name and alias (openyurt cmd/yurt-manager/names/controller_names.go).
const (
	gatewayDNSController = "gateway-dns-controller"
	gatewayDNSAlias      = "gatewaydns"
	controllersFlag      = "--controllers"
)

// gatewayDNSStep switches yurt-manager's gateway-dns controller off while
// the sync writes edge-tunnel-nodes, so two writers never fight over it:
// yurt-manager's --controllers gains -gateway-dns-controller, and its
// rollout is waited for. Revert restores the flag as it was.
func gatewayDNSStep() engine.Step {
	return deploymentFlagStep("gateway-dns", deploymentFlag{deployment: yurtManager, flag: controllersFlag},
		"yurt-manager's gateway-dns controller switched off ("+controllersFlag+" gains -"+gatewayDNSController+
			"): the sync is the only writer of "+tunnelnodes.RavenConfigMapName+"; yurt-manager rolled out",
		"no gateway-dns controller writes "+tunnelnodes.RavenConfigMapName,
		func(cur string, exists bool) string {
			if !exists {
				return cur // no --controllers: yurt-manager runs no controller
			}
			return disableGatewayDNS(cur)
		})
}

// gatewayDNSEnabled says whether yurt-manager runs the gateway-dns
// controller with this --controllers list, as it decides: entries are taken
// as pflag splits them (commas, nothing trimmed), an alias stands for its
// controller, the first entry naming the controller decides ("-" off), and
// without one "*" turns it on (it is not off by default).
func gatewayDNSEnabled(list string) bool {
	star := false
	for _, e := range strings.Split(list, ",") {
		name, off := strings.CutPrefix(e, "-")
		if name == gatewayDNSController || name == gatewayDNSAlias {
			return !off
		}
		star = star || e == "*"
	}
	return star
}

// disableGatewayDNS returns the --controllers list with the gateway-dns
// controller off: unchanged when it is off already, else with
// -gateway-dns-controller first, so it decides whatever follows.
func disableGatewayDNS(list string) string {
	if !gatewayDNSEnabled(list) {
		return list
	}
	return "-" + gatewayDNSController + "," + list
}
