package tunnelnodes

import (
	"net"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Raven's objects, as yurt-manager's raven controllers name them
// (openyurt pkg/yurtmanager/controller/raven/util/constants.go).
const (
	// RavenGlobalConfigName is Raven's global config ConfigMap.
	RavenGlobalConfigName = "raven-cfg"
	// RavenEnableProxyKey turns Raven's L7 proxy on ("true", any case).
	RavenEnableProxyKey = "enable-l7-proxy"
)

// RavenProxyEnabled reads raven-cfg's data as yurt-manager does: the key
// equal to "true" in any case; a missing ConfigMap (nil data) is off.
func RavenProxyEnabled(data map[string]string) bool {
	v, ok := data[RavenEnableProxyKey]
	return ok && strings.EqualFold(v, "true")
}

// RavenNodeAddress is the address yurt-manager's gateway-dns controller
// writes for a node when the proxy is not used: the first InternalIP that
// parses, else the last ExternalIP that parses (its loop keeps overwriting
// the ExternalIP it found). Matching it byte for byte keeps both writers of
// the records in agreement.
func RavenNodeAddress(n *Node) (addr netip.Addr, reason string) {
	var external netip.Addr
	for _, a := range n.Addresses {
		// net.ParseIP, as upstream parses: no zones, IPv4-mapped written as IPv4.
		ip := net.ParseIP(a.Address)
		if ip == nil {
			continue
		}
		parsed, _ := netip.AddrFromSlice(ip)
		switch a.Type {
		case corev1.NodeInternalIP:
			return parsed.Unmap(), ""
		case corev1.NodeExternalIP:
			external = parsed.Unmap()
		}
	}
	if !external.IsValid() {
		return netip.Addr{}, "no InternalIP or ExternalIP"
	}
	return external, ""
}

// RavenRules are yurt-manager's gateway-dns rules: with the L7 proxy on and
// a proxy ClusterIP, every node, cloud ones too, maps to proxyIP; otherwise
// every node maps to RavenNodeAddress.
func RavenRules(proxyEnabled bool, proxyIP netip.Addr) Rules {
	if proxyEnabled && proxyIP.IsValid() {
		return func(addrs []netip.Addr, _ *Node) ([]netip.Addr, bool, string) {
			return append(addrs, proxyIP), true, ""
		}
	}
	return func(addrs []netip.Addr, n *Node) ([]netip.Addr, bool, string) {
		addr, reason := RavenNodeAddress(n)
		if reason != "" {
			return addrs, false, reason
		}
		return append(addrs, addr), false, ""
	}
}
