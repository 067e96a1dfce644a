package verify

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// VerifyDNS resolves every node name at server ("10.96.0.10:53") with a
// real DNS query and prints, per node, the answer and the address it should
// be (tunnel ClusterIP for edge nodes, InternalIP for cloud nodes): the
// check an operator makes with dig from the apiserver host. It returns the
// number of nodes whose answer is wrong.
func VerifyDNS(ctx context.Context, c client.Reader, l layout.Layout, server string, edge labels.Selector, out io.Writer) (mismatches int, err error) {
	if _, err := netip.ParseAddrPort(server); err != nil {
		return 0, fmt.Errorf("--verify-dns %q: want IP:PORT, e.g. 10.96.0.10:53", server)
	}
	dc := &dns.Client{Timeout: 2 * time.Second}
	return verifyNodeNames(ctx, c, l, edge, out, func(_ context.Context, name string, v6 bool) ([]netip.Addr, error) {
		qtype := dns.TypeA
		if v6 {
			qtype = dns.TypeAAAA
		}
		return resolve(dc, server, name, qtype)
	})
}

// VerifyDNSWithResolver is VerifyDNS through r: with net.DefaultResolver,
// the resolv.conf of where it runs (search domains, ndots and all), which
// is the view of a process there, e.g. kube-apiserver's on its node.
func VerifyDNSWithResolver(ctx context.Context, c client.Reader, l layout.Layout, r *net.Resolver, edge labels.Selector, out io.Writer) (mismatches int, err error) {
	return verifyNodeNames(ctx, c, l, edge, out, func(ctx context.Context, name string, v6 bool) ([]netip.Addr, error) {
		network := "ip4"
		if v6 {
			network = "ip6"
		}
		addrs, err := r.LookupNetIP(ctx, network, name)
		for i := range addrs {
			addrs[i] = addrs[i].Unmap()
		}
		slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
		return addrs, err
	})
}

// lookupFunc resolves name to its IPv4 (v6: IPv6) addresses.
type lookupFunc func(ctx context.Context, name string, v6 bool) ([]netip.Addr, error)

// verifyNodeNames resolves every node name with lookup and prints, per
// node, the answer and the address the layout's rules say it should be.
func verifyNodeNames(ctx context.Context, c client.Reader, l layout.Layout, edge labels.Selector, out io.Writer, lookup lookupFunc) (mismatches int, err error) {
	rules, err := rulesNow(ctx, c, l)
	if err != nil {
		return 0, err
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	var want []netip.Addr
	for i := range nodes.Items {
		n := tunnelnodes.NodeOf(&nodes.Items[i], edge)
		var tunneled bool
		var reason string
		want, tunneled, reason = rules(want[:0], &n)
		kind := "cloud"
		switch {
		case tunneled && l.ProxiesCloudNodes:
			kind = "proxy"
		case tunneled:
			kind = "edge"
		}
		if reason != "" || !want[0].IsValid() {
			fmt.Fprintf(out, "%-30s %-5s SKIPPED (%s)\n", n.Name, kind, strings.TrimSpace(reason+" no tunnel ClusterIP"))
			continue
		}
		slices.SortFunc(want, netip.Addr.Compare)
		var got []netip.Addr
		var err error
		// The families the node has (a dual-stack cloud node: both).
		for _, v6 := range []bool{false, true} {
			if !slices.ContainsFunc(want, func(a netip.Addr) bool { return a.Is6() == v6 }) {
				continue
			}
			var addrs []netip.Addr
			if addrs, err = lookup(ctx, n.Name, v6); err != nil {
				break
			}
			got = append(got, addrs...)
		}
		verdict := "OK"
		switch {
		case err != nil:
			verdict = "FAIL (" + err.Error() + ")"
			mismatches++
		case !slices.Equal(got, want):
			verdict = "MISMATCH"
			mismatches++
		}
		fmt.Fprintf(out, "%-30s %-5s %-18s expected %-18s %s\n", n.Name, kind, joinAddrs(got), joinAddrs(want), verdict)
	}
	return mismatches, nil
}

func resolve(c *dns.Client, server, name string, qtype uint16) ([]netip.Addr, error) {
	m := new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype)
	var r *dns.Msg
	var err error
	for range 2 { // one retry: UDP may drop a packet
		if r, _, err = c.Exchange(m, server); err == nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s", dns.RcodeToString[r.Rcode])
	}
	var addrs []netip.Addr
	for _, rr := range r.Answer {
		switch v := rr.(type) {
		case *dns.A:
			a, _ := netip.AddrFromSlice(v.A.To4())
			addrs = append(addrs, a)
		case *dns.AAAA:
			a, _ := netip.AddrFromSlice(v.AAAA)
			addrs = append(addrs, a)
		}
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return addrs, nil
}

func joinAddrs(addrs []netip.Addr) string {
	if len(addrs) == 0 {
		return "-"
	}
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// rulesNow are the layout's rules for the cluster as it is now.
func rulesNow(ctx context.Context, c client.Reader, l layout.Layout) (tunnelnodes.Rules, error) {
	svc := &corev1.Service{}
	if err := c.Get(ctx, kube.Key(l.Service), svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		svc = nil
	}
	var config map[string]string
	if l.Config != "" {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, kube.Key(l.Config), cm); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		config = cm.Data
	}
	rules, _ := l.Rules(config, tunnelnodes.TunnelClusterIP(svc))
	return rules, nil
}
