package cluster

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// The cluster's addresses. The nodes sit on TEST-NET-2 (RFC 5737), which no
// route of these machines uses (their own interface is on TEST-NET-1); the
// pod and Service ranges exist only inside the node namespaces.
const (
	nodeSubnet  = "198.51.100.0/24"
	hostAddress = "198.51.100.1/24" // the bridge's, so this process reaches the apiserver
	bridgeName  = "ydbr0"
	serviceCIDR = "10.96.0.0/16"
	podCIDR     = "10.244.0.0/16"
	kubeDNSIP   = "10.96.0.10"
	// kubernetesServiceIP is the default/kubernetes Service's ClusterIP.
	kubernetesServiceIP = "10.96.0.1"
	apiServerURL        = "https://198.51.100.10:6443"
)

// ip runs iproute2's ip.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// checkSubnetFree refuses to start when a route of the machine already
// covers the node subnet: the cluster would shadow it.
func checkSubnetFree() error {
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return fmt.Errorf("ip route: %w", err)
	}
	ours := netip.MustParsePrefix(nodeSubnet)
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.Contains(line, "dev "+bridgeName) {
			continue
		}
		dst := f[0]
		if dst == "default" || dst == "local" || dst == "broadcast" {
			continue
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		p, err := netip.ParsePrefix(dst)
		if err == nil && p.Overlaps(ours) {
			return fmt.Errorf("the machine already routes %s (%q): the test cluster needs %s to itself", p, line, nodeSubnet)
		}
	}
	return nil
}

// upBridge makes the bridge that joins the nodes, with the one address of the
// root namespace on the node subnet. Forwarding stays off in the root
// namespace and the nodes have no default route, so nothing is routed out.
func upBridge() error {
	if err := ip("link", "add", bridgeName, "type", "bridge"); err != nil {
		return err
	}
	if err := ip("addr", "add", hostAddress, "dev", bridgeName); err != nil {
		return err
	}
	return ip("link", "set", bridgeName, "up")
}

// upNodeNetwork makes node's network namespace: a veth to the bridge, the
// Service range routed to an empty bridge (the kernel has no dummy
// interfaces) so kube-proxy's DNAT applies, and routes to the other nodes'
// pod ranges.
func upNodeNetwork(n *Node, peers []*Node) error {
	host, inner := "ydh-"+n.short, "ydn-"+n.short
	steps := [][]string{
		{"netns", "add", n.netns},
		{"link", "add", host, "type", "veth", "peer", "name", inner, "netns", n.netns},
		{"link", "set", host, "master", bridgeName},
		{"link", "set", host, "up"},
		{"-n", n.netns, "link", "set", "lo", "up"},
		{"-n", n.netns, "addr", "add", n.IP + "/24", "dev", inner},
		{"-n", n.netns, "link", "set", inner, "up"},
		{"-n", n.netns, "link", "add", "svc0", "type", "bridge"},
		{"-n", n.netns, "link", "set", "svc0", "up"},
		{"-n", n.netns, "route", "add", serviceCIDR, "dev", "svc0"},
	}
	for _, p := range peers {
		if p != n {
			steps = append(steps, []string{"-n", n.netns, "route", "add", p.PodCIDR, "via", p.IP})
		}
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	sysctls := [][]string{
		{"sysctl", "-qw", "net.ipv6.conf." + host + ".disable_ipv6=1"},
		{"ip", "netns", "exec", n.netns, "sysctl", "-qw", "net.ipv6.conf." + inner + ".disable_ipv6=1"},
		{"ip", "netns", "exec", n.netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	for _, s := range sysctls {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}

// RefuseFromOutside makes the node refuse TCP connections to ports from
// anywhere but itself, as an edge node behind a firewall refuses the cloud:
// what then reaches them came through the tunnel, whose agent on the node
// dials them. The returned func lifts it.
func (n *Node) RefuseFromOutside(ports ...int) (lift func() error, err error) {
	var list []string
	for _, p := range ports {
		list = append(list, strconv.Itoa(p))
	}
	rule := []string{"INPUT", "-p", "tcp", "-m", "multiport", "--dports", strings.Join(list, ","), "!", "-s", n.IP, "-j", "REJECT", "--reject-with", "tcp-reset"}
	iptables := func(op string) error {
		out, err := exec.Command("ip", append([]string{"netns", "exec", n.netns, "iptables", "-w", op}, rule...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s %s on %s: %v: %s", op, strings.Join(rule, " "), n.Name, err, out)
		}
		return nil
	}
	if err := iptables("-I"); err != nil {
		return nil, err
	}
	return func() error { return iptables("-D") }, nil
}
