package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// spareNode is a machine a test or benchmark may bring up (AddSpareNode),
// an edge node like worker-1. It is defined up front so that teardown
// removes it whether or not a run brought it up.
func spareNode(c *Cluster) *Node {
	return extraMachine(c, &Node{Name: "edge-spare", IP: "198.51.100.12", IP6: "2001:db8:100::12", PodCIDR: "10.244.2.0/24", PodCIDR6: "2001:db8:244:2::/64", short: "s1", Edge: true})
}

func extraMachine(c *Cluster, n *Node) *Node {
	n.c, n.netns, n.dir = c, "yurtdns-"+n.Name, filepath.Join(c.dir, "nodes", n.Name)
	n.kubelet.start, n.yurthub.start = n.startKubeletOnce, n.startYurthubOnce
	return n
}

// machines are the nodes and the extra machines, up or not: what teardown
// removes.
func (c *Cluster) machines() []*Node {
	all := c.Nodes[:len(c.Nodes):len(c.Nodes)]
	if c.Node(c.spare.Name) == nil {
		all = append(all, c.spare)
	}
	return all
}

// AddSpareNode brings up the spare machine — its network namespace, mount
// namespace, containerd with kubeadm's images and the other images, and its
// kubelet waiting for a configuration — without joining it: JoinAs does,
// under any node name.
func (c *Cluster) AddSpareNode(ctx context.Context) (*Node, error) {
	return c.addMachine(c.spare)
}

// addMachine brings n's machine up and adds it to the nodes: the routes of
// every node to its pods, containerd with the cluster's images, its kubelet
// waiting for a configuration.
func (c *Cluster) addMachine(n *Node) (*Node, error) {
	if c.Node(n.Name) != nil {
		return n, nil
	}
	// A new machine gets the packages the control-plane node has.
	n.setVersion(c.Master().Version())
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return nil, err
	}
	if err := upNodeNetwork(n, c.Nodes); err != nil {
		return nil, err
	}
	for _, p := range c.Nodes {
		for _, r := range podRoutes(p.netns, n, p.gatewayTo(n)) {
			if err := ip(r...); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range c.sites {
		if err := s.routePods(n); err != nil {
			return nil, err
		}
	}
	for _, r := range podRoutes(loadBalancerNetns, n, n.reachableAt()) {
		if err := ip(r...); err != nil {
			return nil, err
		}
	}
	if err := c.makeCgroups(n); err != nil {
		return nil, err
	}
	if err := n.startAnchor(); err != nil {
		return nil, err
	}
	if err := n.startRuntime(c.images, c.pause); err != nil {
		return nil, err
	}
	c.Nodes = append(c.Nodes, n)
	n.StartKubelet()
	c.logf("machine %s up, not joined", n.Name)
	return n, nil
}

// JoinAs joins the node as yurtadm join does, registering it as nodeName:
// kubeadm join, then yurthub in front of its kubelet. A node joined before
// is reset first (yurthub stopped and its cache removed, kubeadm reset, as
// an operator re-using a machine would), so one machine can join again and
// again under new names; the Node object of its previous name is the
// caller's to delete.
func (n *Node) JoinAs(ctx context.Context, nodeName string) error {
	if _, err := os.Stat(filepath.Join(n.StateDir("etc/kubernetes"), "kubelet.conf")); err == nil {
		n.StopKubelet()
		n.StopYurthub()
		if out, err := n.Run(ctx, n.c.Kubeadm(n.Version()), "reset", "--force", "--cri-socket", "unix:///run/containerd/containerd.sock"); err != nil {
			return fmt.Errorf("kubeadm reset on %s: %w: %s", n.Name, err, out)
		}
		for _, d := range []string{"var/lib/yurthub", "var/lib/openyurt"} {
			entries, _ := os.ReadDir(n.StateDir(d))
			for _, e := range entries {
				if err := os.RemoveAll(filepath.Join(n.StateDir(d), e.Name())); err != nil {
					return err
				}
			}
		}
		n.StartKubelet()
	}
	n.registeredAs = nodeName
	config, err := n.c.kubeadmConfigAs(n, nodeName)
	if err != nil {
		return err
	}
	if out, err := n.Run(ctx, n.c.Kubeadm(n.Version()), "join", "--config", config, "-v=1"); err != nil {
		return fmt.Errorf("kubeadm join %s as %s: %w: %s", n.Name, nodeName, err, strings.TrimSpace(out))
	}
	return n.putBehindYurthub(ctx)
}
