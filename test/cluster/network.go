package cluster

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// The cluster's addresses, of both families (kubeadm's dual-stack
// configuration, IPv4 first). The nodes sit on TEST-NET-2 (RFC 5737) and on
// 2001:db8::/32 (RFC 3849, documentation), which no route of these machines
// uses (their own interface is on TEST-NET-1, and fd00::/64 here); the pod
// and Service ranges exist only inside the node namespaces.
const (
	nodeSubnet   = "198.51.100.0/24"
	nodeSubnet6  = "2001:db8:100::/64"
	hostAddress  = "198.51.100.1/24" // the bridge's, so this process reaches the apiserver
	bridgeName   = "ydbr0"
	serviceCIDR  = "10.96.0.0/16"
	serviceCIDR6 = "2001:db8:96::/112"
	podCIDR      = "10.244.0.0/16"
	podCIDR6     = "2001:db8:244::/56"
	kubeDNSIP    = "10.96.0.10"
	// kubeDNSIP6 is kubeadm's DNS address rule (the tenth of the range) in
	// the IPv6 Service range: kube-dns gets it once made dual-stack.
	kubeDNSIP6 = "2001:db8:96::a"
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
// covers a range of the cluster: the cluster would shadow it.
func checkSubnetFree() error {
	for family, ranges := range map[string][]string{"-4": {nodeSubnet}, "-6": {nodeSubnet6, podCIDR6, serviceCIDR6}} {
		out, err := exec.Command("ip", family, "route", "show", "table", "all").Output()
		if err != nil {
			return fmt.Errorf("ip %s route: %w", family, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || strings.Contains(line, "dev "+bridgeName) {
				continue
			}
			dst := f[0]
			if dst == "local" || dst == "broadcast" || dst == "multicast" || dst == "anycast" || dst == "unreachable" {
				dst = f[1]
			}
			if dst == "default" {
				continue
			}
			p, err := netip.ParsePrefix(dst)
			if err != nil {
				a, aerr := netip.ParseAddr(dst)
				if aerr != nil {
					continue
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			if p.Addr().IsLinkLocalUnicast() || p.Addr().IsMulticast() {
				continue
			}
			for _, r := range ranges {
				if ours := netip.MustParsePrefix(r); p.Overlaps(ours) {
					return fmt.Errorf("the machine already routes %s (%q): the test cluster needs %s to itself", p, line, r)
				}
			}
		}
	}
	return nil
}

// upBridge makes the bridge that joins the nodes, with the one address of the
// root namespace on the node subnet. Forwarding stays off in the root
// namespace and the nodes have no default route, so nothing is routed out.
// The root namespace stays off the IPv6 network (it is off IPv4 forwarding
// too); the bridge still carries the nodes' IPv6 frames, and floods their
// neighbour solicitations (no MLD querier runs here to snoop on).
func upBridge() error {
	if err := ip("link", "add", bridgeName, "type", "bridge", "mcast_snooping", "0"); err != nil {
		return err
	}
	if out, err := exec.Command("sysctl", "-qw", "net.ipv6.conf."+bridgeName+".disable_ipv6=1").CombinedOutput(); err != nil {
		return fmt.Errorf("sysctl: %v: %s", err, out)
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
	if err := ip("netns", "add", n.netns); err != nil {
		return err
	}
	// Set before any link of the node exists: no link's IPv6 address is
	// tentative (unusable for a second or two while duplicate address
	// detection runs), and the node routes IPv6 as kubeadm requires.
	sysctls := [][]string{
		{"ip", "netns", "exec", n.netns, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0"},
		{"ip", "netns", "exec", n.netns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0"},
		{"ip", "netns", "exec", n.netns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
		{"ip", "netns", "exec", n.netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	for _, s := range sysctls {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	steps := [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", inner, "netns", n.netns},
		{"link", "set", host, "master", bridgeName},
		{"link", "set", host, "up"},
		{"-n", n.netns, "link", "set", "lo", "up"},
		{"-n", n.netns, "addr", "add", n.IP + "/24", "dev", inner},
		{"-n", n.netns, "addr", "add", n.IP6 + "/64", "dev", inner, "nodad"},
		{"-n", n.netns, "link", "set", inner, "up"},
		{"-n", n.netns, "link", "add", "svc0", "type", "bridge"},
		{"-n", n.netns, "link", "set", "svc0", "up"},
		{"-n", n.netns, "route", "add", serviceCIDR, "dev", "svc0"},
		{"-n", n.netns, "-6", "route", "add", serviceCIDR6, "dev", "svc0"},
	}
	for _, p := range peers {
		if p != n {
			steps = append(steps, []string{"-n", n.netns, "route", "add", p.PodCIDR, "via", p.IP},
				[]string{"-n", n.netns, "-6", "route", "add", p.PodCIDR6, "via", p.IP6})
		}
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	// The root namespace's end of the veth is a bridge port, no more.
	if out, err := exec.Command("sysctl", "-qw", "net.ipv6.conf."+host+".disable_ipv6=1").CombinedOutput(); err != nil {
		return fmt.Errorf("sysctl: %v: %s", err, out)
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
	own := map[string]string{"iptables": n.IP, "ip6tables": n.IP6} // each family's binary
	iptables := func(op string) error {
		for cmd, addr := range own {
			rule := []string{"INPUT", "-p", "tcp", "-m", "multiport", "--dports", strings.Join(list, ","), "!", "-s", addr, "-j", "REJECT", "--reject-with", "tcp-reset"}
			out, err := exec.Command("ip", append([]string{"netns", "exec", n.netns, cmd, "-w", op}, rule...)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s %s %s on %s: %v: %s", cmd, op, strings.Join(rule, " "), n.Name, err, out)
			}
		}
		return nil
	}
	if err := iptables("-I"); err != nil {
		return nil, err
	}
	return func() error { return iptables("-D") }, nil
}
