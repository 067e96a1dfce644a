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

// VerifyDNS resolves every node name at server ("10.96.0.10:53",
// "[2001:db8::a]:53") with real A and AAAA queries and prints, per node, the
// answers and the addresses they should be (the tunnel Service's ClusterIP
// of each family for edge nodes, a cloud node's own address of each
// family): the check an operator makes with dig from the apiserver host. A
// family the name has no address of must answer NODATA, never NXDOMAIN. It
// returns the number of nodes whose answer is wrong.
func VerifyDNS(ctx context.Context, c client.Reader, l layout.Layout, server string, edge labels.Selector, out io.Writer) (mismatches int, err error) {
	if server, err = dnsServer(server); err != nil {
		return 0, err
	}
	dc := &dns.Client{Timeout: 2 * time.Second}
	return verifyNodeNames(ctx, c, l, edge, out, func(_ context.Context, name string, v6 bool) ([]netip.Addr, error) {
		qtype := dns.TypeA
		if v6 {
			qtype = dns.TypeAAAA
		}
		return resolve(dc, server, name, qtype)
	}, true)
}

// VerifyDNSWithResolver is VerifyDNS through r: with net.DefaultResolver,
// the resolv.conf of where it runs (search domains, ndots and all), which
// is the view of a process there, e.g. kube-apiserver's on its node. It
// asks only the families the name has: Go's resolver reads NODATA as not
// found, like NXDOMAIN, and an empty answer with neither the aa nor the ra
// flag (a cache's copy) as a lame referral.
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
	}, false)
}

// dnsServer is the --verify-dns flag as the DNS client dials it: IP:PORT,
// an IPv6 address in brackets (as net.SplitHostPort splits it), never a
// host name.
func dnsServer(flag string) (string, error) {
	ap, err := netip.ParseAddrPort(flag)
	if err != nil {
		return "", fmt.Errorf("--verify-dns %q: want IP:PORT, e.g. 10.96.0.10:53 or [fd00:10:96::a]:53", flag)
	}
	return ap.String(), nil
}

// lookupFunc resolves name to its IPv4 (v6: IPv6) addresses: none and no
// error when the name has none of that family (NODATA).
type lookupFunc func(ctx context.Context, name string, v6 bool) ([]netip.Addr, error)

// verifyNodeNames resolves every node name with lookup and prints, per
// node, the answers and the addresses the layout's rules say they should
// be. With askLacking it also asks the family a name has no address of,
// which must answer NODATA (lookup: no address, no error).
func verifyNodeNames(ctx context.Context, c client.Reader, l layout.Layout, edge labels.Selector, out io.Writer, lookup lookupFunc, askLacking bool) (mismatches int, err error) {
	rules, tunnelIPs, err := rulesNow(ctx, c, l)
	if err != nil {
		return 0, err
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	var addrs []netip.Addr
	for i := range nodes.Items {
		n := tunnelnodes.NodeOf(&nodes.Items[i], edge)
		var tunneled bool
		var reason string
		addrs, tunneled, reason = rules(addrs[:0], &n)
		kind := "cloud"
		switch {
		case tunneled && l.ProxiesCloudNodes:
			kind = "proxy"
		case tunneled:
			kind = "edge"
		}
		if reason != "" || !addrs[0].IsValid() {
			fmt.Fprintf(out, "%-30s %-5s SKIPPED (%s)\n", n.Name, kind, strings.TrimSpace(reason+" no tunnel ClusterIP"))
			continue
		}
		want := addrs
		if tunneled { // yurthosts answers the Service's ClusterIP of each family
			want = tunnelIPs
		}
		want = slices.SortedFunc(slices.Values(want), netip.Addr.Compare)
		var got []netip.Addr
		verdict := "OK"
		for _, qtype := range []string{"A", "AAAA"} {
			v6 := qtype == "AAAA"
			if !askLacking && !slices.ContainsFunc(want, func(a netip.Addr) bool { return a.Is6() == v6 }) {
				continue
			}
			family, err := lookup(ctx, n.Name, v6)
			got = append(got, family...)
			if err != nil && verdict == "OK" {
				verdict = "FAIL (" + qtype + ": " + err.Error() + ")"
			}
		}
		switch {
		case verdict != "OK":
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

// rulesNow are the layout's rules for the cluster as it is now, and the
// tunnel Service's ClusterIPs (one per family).
func rulesNow(ctx context.Context, c client.Reader, l layout.Layout) (tunnelnodes.Rules, []netip.Addr, error) {
	svc := &corev1.Service{}
	if err := c.Get(ctx, kube.Key(l.Service), svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		svc = nil
	}
	var config map[string]string
	if l.Config != "" {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, kube.Key(l.Config), cm); client.IgnoreNotFound(err) != nil {
			return nil, nil, err
		}
		config = cm.Data
	}
	rules, _ := l.Rules(config, tunnelnodes.TunnelClusterIP(svc))
	return rules, tunnelnodes.ServiceClusterIPs(svc), nil
}
