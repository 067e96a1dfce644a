package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The cluster's shape beyond its nodes: haproxy in front of the
// control-plane nodes, as kubeadm's docs/ha-considerations.md sets it up,
// and the NAT routers of the edge sites.

// site is an edge site: its nodes sit on siteSubnet behind a router
// namespace, whose outside address on the bridge is the only one the cloud
// sees. The router masquerades the site's node addresses and drops any
// connection the cloud opens to them; it routes the pod ranges both ways.
type site struct {
	name, short       string
	outside, outside6 string
	netns             string
}

func newSite(name, short, outside, outside6 string) *site {
	return &site{name: name, short: short, outside: outside, outside6: outside6, netns: "yurtdns-" + name}
}

// up makes the router's namespace, its link to the bridge and its NAT.
func (s *site) up() error {
	if err := ip("netns", "add", s.netns); err != nil {
		return err
	}
	if err := netnsSysctls(s.netns, "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0",
		"net.ipv6.conf.all.forwarding=1", "net.ipv4.ip_forward=1"); err != nil {
		return err
	}
	host, out := "ydh-"+s.short, "ydo-"+s.short
	steps := [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", out, "netns", s.netns},
		{"link", "set", host, "master", bridgeName},
		{"link", "set", host, "up"},
		{"-n", s.netns, "link", "set", "lo", "up"},
		{"-n", s.netns, "addr", "add", s.outside + "/24", "dev", out},
		{"-n", s.netns, "addr", "add", s.outside6 + "/64", "dev", out, "nodad"},
		{"-n", s.netns, "link", "set", out, "up"},
	}
	for _, st := range steps {
		if err := ip(st...); err != nil {
			return err
		}
	}
	if out, err := exec.Command("sysctl", "-qw", "net.ipv6.conf."+host+".disable_ipv6=1").CombinedOutput(); err != nil {
		return fmt.Errorf("sysctl: %v: %s", err, out)
	}
	rules := map[string][2]string{"iptables": {siteSubnet}, "ip6tables": {siteSubnet6}}
	for cmd, subnet := range rules {
		for _, r := range [][]string{
			{"-t", "nat", "-A", "POSTROUTING", "-s", subnet[0], "-o", out, "-j", "MASQUERADE"},
			{"-A", "FORWARD", "-i", out, "-d", subnet[0], "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"},
		} {
			if o, err := exec.Command("ip", append([]string{"netns", "exec", s.netns, cmd, "-w"}, r...)...).CombinedOutput(); err != nil {
				return fmt.Errorf("%s %s in %s: %v: %s", cmd, strings.Join(r, " "), s.netns, err, o)
			}
		}
	}
	return nil
}

// routePods routes the pod ranges of p in the router: to its node for one
// of the site's, else to where the node network reaches them.
func (s *site) routePods(p *Node) error {
	via := p.reachableAt()
	if p.site == s {
		via = [2]string{p.IP, p.IP6}
	}
	for _, r := range podRoutes(s.netns, p, via) {
		if err := ip(r...); err != nil {
			return err
		}
	}
	return nil
}

// loadBalancerNetns is haproxy's network namespace, on the bridge at
// loadBalancerIP.
const loadBalancerNetns = "yurtdns-lb"

// haproxyConfig balances the apiservers' TCP port, checking each one's
// /readyz over TLS every second (kubeadm's docs/ha-considerations.md; the
// apiservers let anyone read /readyz): two failures take one out, two
// successes put it back. A connection refused by a stopping apiserver is
// tried again on another one. In the foreground (-db) it writes its servers
// going DOWN and UP to stderr as warnings; stats at :8404/stats.
const haproxyConfig = `global
  maxconn 4000
defaults
  mode tcp
  timeout connect 2s
  timeout client 1h
  timeout server 1h
  timeout check 2s
  retries 3
  option redispatch
frontend apiserver
  bind %[1]s:6443
  default_backend apiservers
backend apiservers
  option httpchk
  http-check connect ssl
  http-check send meth GET uri /readyz
  http-check expect status 200
  balance roundrobin
  default-server inter 1s fall 2 rise 2 check verify none
%[2]slisten stats
  bind %[1]s:8404
  mode http
  stats enable
  stats uri /stats
`

// startLoadBalancer makes haproxy's namespace and starts haproxy, in front
// of every control-plane node (down until each serves).
func (c *Cluster) startLoadBalancer() error {
	if err := ip("netns", "add", loadBalancerNetns); err != nil {
		return err
	}
	steps := [][]string{
		{"link", "add", "ydh-lb", "type", "veth", "peer", "name", "ydn-lb", "netns", loadBalancerNetns},
		{"link", "set", "ydh-lb", "master", bridgeName},
		{"link", "set", "ydh-lb", "up"},
		{"-n", loadBalancerNetns, "link", "set", "lo", "up"},
		{"-n", loadBalancerNetns, "addr", "add", loadBalancerIP + "/24", "dev", "ydn-lb"},
		{"-n", loadBalancerNetns, "addr", "add", loadBalancerIP6 + "/64", "dev", "ydn-lb", "nodad"},
		{"-n", loadBalancerNetns, "link", "set", "ydn-lb", "up"},
	}
	// Pods reach the control-plane endpoint from their own addresses (the
	// CNI does not masquerade): it routes their ranges back as a node does.
	for _, n := range c.Nodes {
		steps = append(steps, podRoutes(loadBalancerNetns, n, n.reachableAt())...)
	}
	for _, st := range steps {
		if err := ip(st...); err != nil {
			return err
		}
	}
	var servers strings.Builder
	for _, n := range c.ControlPlanes() {
		fmt.Fprintf(&servers, "  server %s %s:6443\n", n.Name, n.IP)
	}
	dir := filepath.Join(c.dir, "lb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	config := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(haproxyConfig, loadBalancerIP, servers.String())), 0o644); err != nil {
		return err
	}
	logf, err := os.OpenFile(c.loadBalancerLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("ip", "netns", "exec", loadBalancerNetns, "haproxy", "-db", "-f", config)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = logf, logf
	if _, err := c.start("haproxy", cmd); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.retry(ctx, 10*time.Second, "haproxy listening on "+loadBalancerIP+":6443", func() error {
		return exec.Command("bash", "-c", "exec 3<>/dev/tcp/"+loadBalancerIP+"/8404").Run()
	})
}

// loadBalancerLog is haproxy's log: its apiservers going DOWN and UP.
func (c *Cluster) loadBalancerLog() string { return filepath.Join(c.dir, "lb", "haproxy.log") }

// LoadBalancerURL is the control-plane endpoint's URL.
func LoadBalancerURL() string { return apiServerURL }

// ControlPlanes are the control-plane nodes, master-1 first.
func (c *Cluster) ControlPlanes() []*Node {
	var cps []*Node
	for _, n := range c.Nodes {
		if n.ControlPlane {
			cps = append(cps, n)
		}
	}
	return cps
}

// netboxes are the namespaces besides the machines' (haproxy's, the sites'
// routers) and their links in the root namespace: what teardown removes.
func (c *Cluster) netboxes() (netns, links []string) {
	netns, links = []string{loadBalancerNetns}, []string{"ydh-lb"}
	for _, s := range c.sites {
		netns, links = append(netns, s.netns), append(links, "ydh-"+s.short)
	}
	return netns, links
}

// LoadBalancerStatus is haproxy's status of each apiserver (UP, DOWN, "UP
// 1/2" while it counts checks...), from its stats page.
func (c *Cluster) LoadBalancerStatus() (map[string]string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + loadBalancerIP + ":8404/stats;csv")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil || len(rows) == 0 {
		return nil, fmt.Errorf("haproxy's stats: %v (%d rows)", err, len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[strings.TrimPrefix(h, "# ")] = i
	}
	status := map[string]string{}
	for _, r := range rows[1:] {
		if len(r) > col["status"] && r[col["pxname"]] == "apiservers" && r[col["svname"]] != "BACKEND" {
			status[r[col["svname"]]] = r[col["status"]]
		}
	}
	return status, nil
}

// EtcdMembers are the names of etcd's members, as master-1's member lists
// them (etcd's gRPC gateway, with kubeadm's health-check client
// certificate).
func (c *Cluster) EtcdMembers(ctx context.Context) ([]string, error) {
	pki := filepath.Join(c.Master().StateDir("etc/kubernetes"), "pki", "etcd")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "healthcheck-client.crt"), filepath.Join(pki, "healthcheck-client.key"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+c.Master().IP+":2379/v3/cluster/member/list", strings.NewReader("{}"))
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Members []struct {
			Name string `json:"name"`
		} `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("etcd's member list: %w", err)
	}
	var names []string
	for _, m := range list.Members {
		names = append(names, m.Name)
	}
	return names, nil
}

// CloudNets are the cloud's addresses and pod ranges, of each family: its
// nodes' (the control-plane nodes) and the control-plane endpoint's.
func (c *Cluster) CloudNets() (v4, v6 []string) {
	v4, v6 = []string{loadBalancerIP}, []string{loadBalancerIP6}
	for _, n := range c.Nodes {
		if !n.Edge {
			v4, v6 = append(v4, n.IP, n.PodCIDR), append(v6, n.IP6, n.PodCIDR6)
		}
	}
	return v4, v6
}
