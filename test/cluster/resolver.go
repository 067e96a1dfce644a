package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/yurtdns/yurtdns/test/harness"
)

// Resolver resolves names as a hostNetwork container on a node does: in
// the node's network namespace, with the nameservers, search list and ndots
// of the resolv.conf the kubelet gave the container (for the apiserver
// after install: ClusterFirstWithHostNet, the kube-dns Service).
type Resolver struct {
	Nameservers []string
	Search      []string
	Ndots       int
	node        *Node
}

// ResolverOf reads the resolv.conf of the node's hostNetwork container
// running program (e.g. "kube-apiserver").
func (n *Node) ResolverOf(program string) (*Resolver, error) {
	pid, err := n.ContainerPID(program)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/root/etc/resolv.conf", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &Resolver{node: n, Ndots: 1}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			r.Nameservers = append(r.Nameservers, fields[1])
		case "search":
			r.Search = fields[1:]
		case "options":
			for _, o := range fields[1:] {
				fmt.Sscanf(o, "ndots:%d", &r.Ndots)
			}
		}
	}
	if len(r.Nameservers) == 0 {
		return nil, fmt.Errorf("the resolv.conf of %s on %s names no nameserver", program, n.Name)
	}
	return r, sc.Err()
}

// LookupA returns name's A answers the way the Go resolver walks the search
// list (a name with fewer dots than ndots tries the search domains first),
// and the query that answered.
func (r *Resolver) LookupA(ctx context.Context, name string) (addrs []string, answeredBy string, err error) {
	var candidates []string
	if strings.Count(name, ".") < r.Ndots {
		for _, s := range r.Search {
			candidates = append(candidates, name+"."+s+".")
		}
	}
	candidates = append(candidates, name+".")
	var last harness.DigResult
	for _, q := range candidates {
		if last, err = r.node.Dig(ctx, r.Nameservers[0], q, "A"); err != nil {
			return nil, q, err
		}
		if last.Status == "NOERROR" && len(last.Data("A")) > 0 {
			return last.Data("A"), q, nil
		}
	}
	return nil, name + ".", fmt.Errorf("%s: no address for any of %v (last: %s)", name, candidates, last.Status)
}
