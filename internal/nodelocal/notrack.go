package nodelocal

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// NotrackTable is the nftables table that keeps the node-local cache's
// traffic out of conntrack, as upstream NodeLocal DNSCache's NOTRACK rules
// do: no conntrack entry per query (no table to fill, no UDP race), and
// nothing for kube-proxy's DNAT to touch.
const NotrackTable = "yurtdns-node-local"

// EnsureNotrack (re)writes the table, in one transaction: packets to addr
// (queries from pods and from the node) and from addr (the answers) are
// not tracked.
func EnsureNotrack(addr netip.Addr) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	family, src, dst := notrackFamily(addr)
	if exists, err := hasTable(c, family); err != nil {
		return err
	} else if exists {
		c.DelTable(&nftables.Table{Family: family, Name: NotrackTable})
	}
	t := c.AddTable(&nftables.Table{Family: family, Name: NotrackTable})
	match := func(offset uint32) []expr.Any {
		return []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: uint32(len(addr.AsSlice()))},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr.AsSlice()},
			&expr.Notrack{},
		}
	}
	for _, hook := range []*nftables.ChainHook{nftables.ChainHookPrerouting, nftables.ChainHookOutput} {
		ch := c.AddChain(&nftables.Chain{Name: map[*nftables.ChainHook]string{nftables.ChainHookPrerouting: "prerouting", nftables.ChainHookOutput: "output"}[hook],
			Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook, Priority: nftables.ChainPriorityRaw})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: match(dst)})
		if hook == nftables.ChainHookOutput {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: match(src)})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("writing nftables table %s: %w", NotrackTable, err)
	}
	return nil
}

// RemoveNotrack deletes the table; removed is false when there was none.
func RemoveNotrack(addr netip.Addr) (removed bool, err error) {
	c, err := nftables.New()
	if err != nil {
		return false, err
	}
	family, _, _ := notrackFamily(addr)
	if exists, err := hasTable(c, family); err != nil || !exists {
		return false, err
	}
	c.DelTable(&nftables.Table{Family: family, Name: NotrackTable})
	if err := c.Flush(); err != nil {
		return false, fmt.Errorf("deleting nftables table %s: %w", NotrackTable, err)
	}
	return true, nil
}

// notrackFamily is the table's family and where the source and destination
// addresses sit in the network header.
func notrackFamily(addr netip.Addr) (family nftables.TableFamily, src, dst uint32) {
	if addr.Is4() {
		return nftables.TableFamilyIPv4, 12, 16
	}
	return nftables.TableFamilyIPv6, 8, 24
}

func hasTable(c *nftables.Conn, family nftables.TableFamily) (bool, error) {
	tables, err := c.ListTablesOfFamily(family)
	if err != nil {
		return false, fmt.Errorf("listing nftables tables: %w", err)
	}
	for _, t := range tables {
		if t.Name == NotrackTable {
			return true, nil
		}
	}
	return false, nil
}

// Teardown undoes the cache's setup on this node: addr off the link and the
// NOTRACK table dropped (idempotent; each false when it was not there).
func Teardown(link string, addr netip.Addr) (addrRemoved, tableRemoved bool, err error) {
	if addrRemoved, err = RemoveAddress(link, addr); err != nil {
		return false, false, err
	}
	tableRemoved, err = RemoveNotrack(addr)
	return addrRemoved, tableRemoved, err
}

// OnePerFamily checks addrs for the node-local-dns commands: at least one,
// and at most one of each IP family (each family's NOTRACK table is
// written for one address).
func OnePerFamily(addrs []netip.Addr) error {
	if len(addrs) == 0 {
		return fmt.Errorf("no address")
	}
	var v4, v6 int
	for _, a := range addrs {
		if a.Is4() {
			v4++
		} else {
			v6++
		}
	}
	if v4 > 1 || v6 > 1 {
		return fmt.Errorf("%v: at most one address of each IP family", addrs)
	}
	return nil
}

// TableName is the NOTRACK table of addr's family as nft names it
// ("ip yurtdns-node-local", "ip6 yurtdns-node-local").
func TableName(addr netip.Addr) string {
	if family, _, _ := notrackFamily(addr); family == nftables.TableFamilyIPv4 {
		return "ip " + NotrackTable
	}
	return "ip6 " + NotrackTable
}
