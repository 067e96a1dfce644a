package steps

import (
	"strconv"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
)

// yurt-tunnel-server's Deployment, and the flag of its DNS controller, which
// rewrites yurt-tunnel-nodes while on (openyurt
// cmd/yurt-tunnel-server/app/options: a pflag bool, true by default).
const (
	yurtTunnelServer  = "yurt-tunnel-server"
	dnsControllerFlag = "--enable-dns-controller"
	dnsControllerOff  = "false"
)

// tunnelDNSStep switches yurt-tunnel-server's DNS controller off while the
// sync writes yurt-tunnel-nodes, so two writers never fight over it:
// --enable-dns-controller=false, and its rollout is waited for. The
// controller's dnat-port sync of the tunnel Service goes off with it; the
// sync keeps those ports itself. Revert restores the flag as it was.
func tunnelDNSStep() engine.Step {
	return deploymentFlagStep("tunnel-dns", deploymentFlag{deployment: yurtTunnelServer, flag: dnsControllerFlag, boolean: true},
		"yurt-tunnel-server's DNS controller switched off ("+dnsControllerFlag+"="+dnsControllerOff+"): the sync is the only writer of "+
			tunnelnodes.ConfigMapName+"; yurt-tunnel-server rolled out",
		"no tunnel DNS controller writes "+tunnelnodes.ConfigMapName,
		disableDNSController)
}

// disableDNSController is the --enable-dns-controller value that keeps the
// controller off: the current one when pflag reads it as false, else
// "false" (absent, alone or true the controller runs; any other value
// keeps yurt-tunnel-server from starting).
func disableDNSController(cur string, exists bool) string {
	if on, err := strconv.ParseBool(cur); exists && err == nil && !on {
		return cur
	}
	return dnsControllerOff
}
