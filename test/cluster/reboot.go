package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Reboot power-cycles the node as far as namespaces allow: every process of
// the node is killed (its containers, containerd and the shims, yurthub,
// the kubelet), and what a reboot takes from memory goes too — containerd's
// state under /run (the sandboxes' network namespaces), kube-proxy's rules,
// conntrack, nftables tables, addresses added to lo. Then containerd,
// yurthub and the kubelet start again, as systemd would; the kubelet makes
// new sandboxes, so every pod gets a new IP. What a disk keeps stays:
// images, /var/lib/kubelet, yurthub's cache. Only the namespace anchor and
// the node's upstream resolver (the machine's, not the node's) survive.
func (n *Node) Reboot(ctx context.Context) error {
	n.StopKubelet()
	n.yurthub.Stop()
	for _, pid := range pidsInCgroup(filepath.Join("/sys/fs/cgroup/pids", n.cgroupName())) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if n.containerd != nil {
		n.containerd.stop(10 * time.Second)
	}
	for _, pid := range pidsInNetns(n.netns) {
		if pid != n.anchor.pid && (n.stubResolver == nil || pid != n.stubResolver.pid) {
			killPID(pid, 0)
		}
	}
	// The cgroups are in memory too: left behind, the kubelet's cAdvisor
	// spends a minute on the dead containers' ones before it runs a pod.
	if err := removeCgroups(n.cgroupName()); err != nil {
		return fmt.Errorf("reboot %s: %w", n.Name, err)
	}
	if err := n.c.makeCgroups(n); err != nil {
		return fmt.Errorf("reboot %s: %w", n.Name, err)
	}
	if err := n.clearRunState(ctx); err != nil {
		return fmt.Errorf("reboot %s: %w", n.Name, err)
	}
	if err := n.clearKernelState(ctx); err != nil {
		return fmt.Errorf("reboot %s: %w", n.Name, err)
	}
	if err := n.startContainerd(); err != nil {
		return err
	}
	if n.ThroughYurthub() {
		if err := ip("-n", n.netns, "addr", "replace", yurthubAddress+"/32", "dev", "lo", "scope", "host"); err != nil {
			return err
		}
		n.yurthub.Start()
	}
	n.StartKubelet()
	return nil
}

// clearRunState removes containerd's state directory (on a machine, under
// the tmpfs /run), unmounting the sandboxes' network namespaces in it first.
func (n *Node) clearRunState(ctx context.Context) error {
	state := filepath.Join(n.dir, "containerd", "state")
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mounts", n.anchor.pid))
	if err != nil {
		return err
	}
	var under []string
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], state+"/") {
			under = append(under, f[1])
		}
	}
	// Deepest first.
	sort.Sort(sort.Reverse(sort.StringSlice(under)))
	for _, m := range under {
		if _, err := n.Run(ctx, "umount", "-l", m); err != nil {
			return err
		}
	}
	return os.RemoveAll(state)
}

// iptablesTables are the nftables tables iptables-nft keeps its rules in:
// the harness's own (the link cut-offs, the refused ports) stay; kube-proxy
// --cleanup takes its chains out of them.
var iptablesTables = []string{"filter", "nat", "mangle", "raw", "security"}

// clearKernelState drops what the node's kernel would lose in a reboot and
// its programs set up again when they start.
func (n *Node) clearKernelState(ctx context.Context) error {
	if _, err := n.Run(ctx, n.c.bin("kube-proxy"), "--cleanup"); err != nil {
		return err
	}
	if out, err := n.NetCommand(ctx, "conntrack", "-F").CombinedOutput(); err != nil && !strings.Contains(string(out), "flushed") {
		return fmt.Errorf("conntrack -F: %v: %s", err, out)
	}
	ns, err := netns.GetFromName(n.netns)
	if err != nil {
		return err
	}
	defer ns.Close()
	nft, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return err
	}
	tables, err := nft.ListTables()
	if err != nil {
		return fmt.Errorf("nftables tables: %w", err)
	}
	for _, t := range tables {
		if !slices.Contains(iptablesTables, t.Name) {
			nft.DelTable(t)
		}
	}
	if err := nft.Flush(); err != nil {
		return fmt.Errorf("deleting nftables tables: %w", err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	addrs, err := h.AddrList(lo, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a.IP.IsLoopback() {
			continue
		}
		if err := h.AddrDel(lo, &a); err != nil {
			return fmt.Errorf("removing %s from lo: %w", a.IPNet, err)
		}
	}
	return nil
}

// PodPID finds the process of a pod's running container (not its sandbox's)
// on the node from the node's containerd alone (the apiserver may be out of
// reach): the pod's network namespace, or the files the container sees.
func (n *Node) PodPID(ctx context.Context, namespace, pod string) (int, error) {
	out, err := n.Run(ctx, "ctr", "-n", "k8s.io", "containers", "ls", "-q",
		fmt.Sprintf(`labels."io.kubernetes.pod.name"==%s,labels."io.kubernetes.pod.namespace"==%s,labels."io.cri-containerd.kind"==container`, pod, namespace))
	if err != nil {
		return 0, err
	}
	for _, id := range strings.Fields(out) {
		if pid, err := n.ProcessOfContainer(id); err == nil {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no running container of pod %s/%s on %s", namespace, pod, n.Name)
}

// PodIP is the IPv4 address of eth0 in a pod's network namespace, as the
// node sees it now (the apiserver may still have the one from before a
// reboot).
func (n *Node) PodIP(ctx context.Context, namespace, pod string) (string, error) {
	pid, err := n.PodPID(ctx, namespace, pod)
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, "nsenter", "-t", fmt.Sprint(pid), "-n", "ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("eth0 of pod %s/%s: %v: %s", namespace, pod, err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if ip, _, err := net.ParseCIDR(f); err == nil {
			return ip.String(), nil
		}
	}
	return "", fmt.Errorf("pod %s/%s has no IPv4 address on eth0: %s", namespace, pod, out)
}
