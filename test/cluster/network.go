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
	// loadBalancerIP is haproxy's, the control-plane endpoint: every
	// kubeconfig's server (admin, kubelets, kube-proxy, yurthub).
	loadBalancerIP  = "198.51.100.5"
	loadBalancerIP6 = "2001:db8:100::5"
	apiServerURL    = "https://" + loadBalancerIP + ":6443"
	// An edge site's network (TEST-NET-3, RFC 5737; and 2001:db8:113::/64)
	// behind its NAT router: every site uses the same one, so the sites'
	// nodes share one node address, as two factories' LANs both do.
	siteSubnet   = "203.0.113.0/24"
	siteSubnet6  = "2001:db8:113::/64"
	siteGateway  = "203.0.113.1"
	siteGateway6 = "2001:db8:113::1"
	siteNodeIP   = "203.0.113.10"
	siteNodeIP6  = "2001:db8:113::10"
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
	for family, ranges := range map[string][]string{"-4": {nodeSubnet, siteSubnet}, "-6": {nodeSubnet6, podCIDR6, serviceCIDR6, siteSubnet6}} {
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

// upNodeNetwork makes node's network namespace: a veth to the bridge (to its
// site's router, for a node of an edge site), the Service range routed to an
// empty bridge (the kernel has no dummy interfaces) so kube-proxy's DNAT
// applies, and routes to the other nodes' pod ranges.
func upNodeNetwork(n *Node, peers []*Node) error {
	inner := "ydn-" + n.short
	if err := ip("netns", "add", n.netns); err != nil {
		return err
	}
	// Set before any link of the node exists: no link's IPv6 address is
	// tentative (unusable for a second or two while duplicate address
	// detection runs), and the node routes IPv6 as kubeadm requires.
	if err := netnsSysctls(n.netns, "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0",
		"net.ipv6.conf.all.forwarding=1", "net.ipv4.ip_forward=1"); err != nil {
		return err
	}
	var steps [][]string
	if n.site == nil {
		host := "ydh-" + n.short
		steps = append(steps, []string{"link", "add", host, "type", "veth", "peer", "name", inner, "netns", n.netns},
			[]string{"link", "set", host, "master", bridgeName},
			[]string{"link", "set", host, "up"})
	} else {
		// The site's LAN: a veth from its router.
		lan := "ydl-" + n.site.short
		steps = append(steps, []string{"-n", n.site.netns, "link", "add", lan, "type", "veth", "peer", "name", inner, "netns", n.netns},
			[]string{"-n", n.site.netns, "addr", "add", siteGateway + "/24", "dev", lan},
			[]string{"-n", n.site.netns, "addr", "add", siteGateway6 + "/64", "dev", lan, "nodad"},
			[]string{"-n", n.site.netns, "link", "set", lan, "up"})
	}
	steps = append(steps,
		[]string{"-n", n.netns, "link", "set", "lo", "up"},
		[]string{"-n", n.netns, "addr", "add", n.IP + "/24", "dev", inner},
		[]string{"-n", n.netns, "addr", "add", n.IP6 + "/64", "dev", inner, "nodad"},
		[]string{"-n", n.netns, "link", "set", inner, "up"},
		[]string{"-n", n.netns, "link", "add", "svc0", "type", "bridge"},
		[]string{"-n", n.netns, "link", "set", "svc0", "up"},
		[]string{"-n", n.netns, "route", "add", serviceCIDR, "dev", "svc0"},
		[]string{"-n", n.netns, "-6", "route", "add", serviceCIDR6, "dev", "svc0"},
	)
	if n.site != nil {
		// The cloud only through the router, which masquerades the site.
		steps = append(steps, []string{"-n", n.netns, "route", "add", nodeSubnet, "via", siteGateway},
			[]string{"-n", n.netns, "-6", "route", "add", nodeSubnet6, "via", siteGateway6})
	}
	for _, p := range peers {
		if p != n {
			steps = append(steps, podRoutes(n.netns, p, n.gatewayTo(p))...)
		}
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	if n.site == nil {
		// The root namespace's end of the veth is a bridge port, no more.
		if out, err := exec.Command("sysctl", "-qw", "net.ipv6.conf.ydh-"+n.short+".disable_ipv6=1").CombinedOutput(); err != nil {
			return fmt.Errorf("sysctl: %v: %s", err, out)
		}
	}
	return nil
}

// netnsSysctls sets kernel settings in a network namespace.
func netnsSysctls(netns string, settings ...string) error {
	for _, s := range settings {
		if out, err := exec.Command("ip", "netns", "exec", netns, "sysctl", "-qw", s).CombinedOutput(); err != nil {
			return fmt.Errorf("sysctl %s in %s: %v: %s", s, netns, err, out)
		}
	}
	return nil
}

// podRoutes are ip's arguments that route p's pod ranges in netns via the
// gateway of each family.
func podRoutes(netns string, p *Node, via [2]string) [][]string {
	return [][]string{{"-n", netns, "route", "add", p.PodCIDR, "via", via[0]}, {"-n", netns, "-6", "route", "add", p.PodCIDR6, "via", via[1]}}
}

// reachableAt is where the node network reaches p's pods: p's own address,
// or its site router's, which routes the pod ranges as a site-to-site VPN
// (Raven's gateway) would while it masquerades the node addresses.
func (p *Node) reachableAt() [2]string {
	if p.site != nil {
		return [2]string{p.site.outside, p.site.outside6}
	}
	return [2]string{p.IP, p.IP6}
}

// gatewayTo is where n sends packets for p's pods: a site's node sends
// everything to its router.
func (n *Node) gatewayTo(p *Node) [2]string {
	if n.site != nil {
		return [2]string{siteGateway, siteGateway6}
	}
	return p.reachableAt()
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
