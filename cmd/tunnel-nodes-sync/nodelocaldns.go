package main

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/internal/nodelocal/leftover"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// newNodeLocalDNSCommand is the node side of install's node-local-dns step:
// what its DaemonSet's init container and per-node Jobs run on each node.
// Hidden: internal (docs/cli.md).
func newNodeLocalDNSCommand() *cobra.Command {
	var link, kubeletDir, node string
	var addresses []string
	var interval time.Duration
	var timeout time.Duration
	addrs := func() ([]netip.Addr, error) {
		var as []netip.Addr
		for _, s := range addresses {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("--address: %w", err)
			}
			as = append(as, a.Unmap())
		}
		if err := nodelocal.OnePerFamily(as); err != nil {
			return nil, fmt.Errorf("--address: %w", err)
		}
		return as, nil
	}
	cmd := &cobra.Command{
		Use:    "node-local-dns",
		Short:  "The node side of NodeLocal DNS (run by install's DaemonSet and Jobs on each node)",
		Hidden: true,
		Args:   cobra.NoArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringSliceVar(&addresses, "address", []string{nodelocal.Address.String()},
		"The node-local cache's addresses, at most one per IP family, the cluster's primary family first (repeat the flag, or separate them with commas)")
	pf.StringVar(&link, "interface", "lo", "The interface the address is on")
	pf.StringVar(&kubeletDir, "kubelet-dir", "/var/lib/kubelet", "The kubelet's directory (its config.yaml; the original is kept in yurtdns-backup/ there)")
	pf.DurationVar(&timeout, "timeout", 5*time.Minute, "How long to wait for the cache to answer and for the restarted kubelet to be healthy")

	cmd.AddCommand(&cobra.Command{
		Use:   "setup",
		Short: "Put each --address on --interface and keep its traffic out of conntrack (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			as, err := addrs()
			if err != nil {
				return err
			}
			for _, a := range as {
				added, err := nodelocal.EnsureAddress(link, a)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s on %s: %s\n", a, link, outcome(added, "added", "already there"))
				if err := nodelocal.EnsureNotrack(a); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "traffic to and from %s: not tracked (nftables table %s)\n", a, tableName(as, a))
			}
			return nil
		},
	}, &cobra.Command{
		Use:   "switch-kubelet",
		Short: "Once each --address answers, point the kubelet's clusterDNS at them (in order) and restart the kubelet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			as, err := addrs()
			if err != nil {
				return err
			}
			a := strings.Join(nodelocal.Strings(as), ",")
			files := nodelocal.NewKubeletFiles(kubeletDir)
			changed, err := nodelocal.Switch(cmd.Context(), nodelocal.SwitchOptions{Files: files, Addresses: as, Timeout: timeout})
			if err != nil {
				return err
			}
			if changed {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: clusterDNS %s (original in %s), kubelet restarted\n", files.Config, a, files.Backup)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: clusterDNS already %s\n", files.Config, a)
			}
			return nil
		},
	}, &cobra.Command{
		Use:   "restore-kubelet",
		Short: "Put the kubelet's original clusterDNS back and restart the kubelet (the cache keeps answering)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			files := nodelocal.NewKubeletFiles(kubeletDir)
			outcome, err := nodelocal.Restore(cmd.Context(), files, timeout)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch outcome {
			case nodelocal.Restored:
				fmt.Fprintf(out, "%s: restored from %s, kubelet restarted\n", files.Config, files.Backup)
			case nodelocal.ClusterDNSRestored:
				fmt.Fprintf(out, "%s: changed since it was switched: only clusterDNS put back, kubelet restarted\n", files.Config)
			default:
				fmt.Fprintf(out, "%s: nothing to restore\n", files.Config)
			}
			return nil
		},
	}, &cobra.Command{
		Use:   "teardown",
		Short: "Undo setup once the cache is gone: take each --address off --interface, drop the nftables tables (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			as, err := addrs()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			return tearDownEach(link, as, func(a netip.Addr, addrRemoved, tableRemoved bool) {
				fmt.Fprintf(out, "%s on %s: %s\n", a, link, outcome(addrRemoved, "removed", "not there"))
				fmt.Fprintf(out, "nftables table %s: %s\n", tableName(as, a), outcome(tableRemoved, "removed", "not there"))
			})
		},
	})
	linger := &cobra.Command{
		Use:   "linger",
		Short: "The leftover forwarder's watch: once no pod on --node resolves at the --address list, tear the node down (as teardown) and let the leftover go",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			as, err := addrs()
			if err != nil {
				return err
			}
			cfg, err := (&kubeconfigFlags{}).restConfig("")
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return leftover.Linger{Client: cs, Namespace: tunnelnodes.Namespace, Node: node, Interval: interval,
				TearDown: func() error {
					return tearDownEach(link, as, func(a netip.Addr, addrRemoved, tableRemoved bool) {
						klog.InfoS("Node torn down", "address", a, "interface", link, "addressRemoved", addrRemoved, "table", tableName(as, a), "tableRemoved", tableRemoved)
					})
				}}.Run(cmd.Context())
		},
	}
	linger.Flags().StringVar(&node, "node", "", "The node this runs on (the downward API's spec.nodeName)")
	linger.Flags().DurationVar(&interval, "interval", 5*time.Second, "How often to look at the node's pods")
	if err := linger.MarkFlagRequired("node"); err != nil {
		panic(err) // a flag that does not exist: a programming error
	}
	cmd.AddCommand(linger)
	return cmd
}

// tearDownEach undoes setup for each of as (nodelocal.Teardown) and tells
// report what it did there.
func tearDownEach(link string, as []netip.Addr, report func(a netip.Addr, addrRemoved, tableRemoved bool)) error {
	for _, a := range as {
		addrRemoved, tableRemoved, err := nodelocal.Teardown(link, a)
		if err != nil {
			return err
		}
		report(a, addrRemoved, tableRemoved)
	}
	return nil
}

// tableName is the NOTRACK table of a's family: its bare name for the IPv4
// address alone (as before IPv6; nft's default family), else its family and
// name.
func tableName(as []netip.Addr, a netip.Addr) string {
	if len(as) == 1 && a.Is4() {
		return nodelocal.NotrackTable
	}
	return nodelocal.TableName(a)
}

// outcome says whether an idempotent action changed anything.
func outcome(changed bool, did, already string) string {
	if changed {
		return did
	}
	return already
}
