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
	if server, err = ParseDNSServer(server); err != nil {
		return 0, err
	}
	dc := &dns.Client{Timeout: 2 * time.Second}
	return verifyNodeNames(ctx, c, l, edge, out, func(_ context.Context, name string, want []netip.Addr) ([]netip.Addr, string) {
		var got []netip.Addr
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			family, err := resolve(dc, server, name, qtype)
			if err != nil {
				return got, "FAIL (" + dns.TypeToString[qtype] + ": " + err.Error() + ")"
			}
			got = append(got, family...)
		}
		if !slices.Equal(got, want) {
			return got, "MISMATCH"
		}
		return got, "OK"
	})
}

// VerifyDNSWithResolver is VerifyDNS through r: with net.DefaultResolver,
// the resolv.conf and hosts file of where it runs (search domains, ndots and
// all), which is the view of a process there, e.g. kube-apiserver's on its
// node. It looks a name up as Go's dialer does, both families at once: a
// name is right when it resolves and every address is one of those it
// should be, since a dialer may take any of them. A hosts file that names
// the node with one family only (a node's own name) is then right too.
func VerifyDNSWithResolver(ctx context.Context, c client.Reader, l layout.Layout, r *net.Resolver, edge labels.Selector, out io.Writer) (mismatches int, err error) {
	return verifyNodeNames(ctx, c, l, edge, out, func(ctx context.Context, name string, want []netip.Addr) ([]netip.Addr, string) {
		got, err := r.LookupNetIP(ctx, "ip", name)
		for i := range got {
			got[i] = got[i].Unmap()
		}
		slices.SortFunc(got, netip.Addr.Compare)
		switch {
		case err != nil:
			return got, "FAIL (" + err.Error() + ")"
		case slices.ContainsFunc(got, func(a netip.Addr) bool { return !slices.Contains(want, a) }):
			return got, "MISMATCH"
		}
		return got, "OK"
	})
}

// ParseDNSServer is the --verify-dns flag as the DNS client dials it: IP:PORT,
// an IPv6 address in brackets (as net.SplitHostPort splits it), never a
// host name.
func ParseDNSServer(flag string) (string, error) {
	ap, err := netip.ParseAddrPort(flag)
	if err != nil {
		return "", fmt.Errorf("--verify-dns %q: want IP:PORT, e.g. 10.96.0.10:53 or [fd00:10:96::a]:53", flag)
	}
	return ap.String(), nil
}

// checkFunc resolves name and judges the answer against want (sorted):
// "OK", "MISMATCH" or "FAIL (why)".
type checkFunc func(ctx context.Context, name string, want []netip.Addr) (got []netip.Addr, verdict string)

// verifyNodeNames resolves every node name with check and prints, per node,
// the answers and the addresses the layout's rules say they should be.
func verifyNodeNames(ctx context.Context, c client.Reader, l layout.Layout, edge labels.Selector, out io.Writer, check checkFunc) (mismatches int, err error) {
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
		got, verdict := check(ctx, n.Name, want)
		if verdict != "OK" {
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
