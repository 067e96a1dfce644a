package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/install/steps"
)

// controlPlanesAlike: on several control-plane nodes, each kube-apiserver
// runs install's edits or none does. A kubeadm upgrade without install's
// kubeadm patch renders one node's static pods again and leaves the others
// as they are: behind a load balancer, a request for an edge node's logs
// then works or fails by the apiserver it lands on. Read as the
// control-plane step's status reads it (the mirror pods).
func controlPlanesAlike(ctx context.Context, c *cluster) (Result, error) {
	r := Result{Name: "control-planes-alike"}
	live, err := steps.LiveAPIServers(ctx, c.env)
	if errors.Is(err, kube.ErrNoControlPlaneNode) {
		r.Outcome, r.Found = Pass, kube.ErrNoControlPlaneNode.Error()+": nothing to compare"
		return r, nil
	}
	if err != nil {
		return r, err
	}
	var have, lacking, unread []string
	var lacks []string // what each lacking one runs instead
	for _, a := range live {
		switch {
		case a.Pod == "":
			unread = append(unread, "no mirror pod kube-apiserver-"+a.Node)
		case len(a.Runs) == 0:
			have = append(have, a.Node)
		default:
			lacking = append(lacking, a.Node)
			if len(lacks) < shownNodes {
				lacks = append(lacks, fmt.Sprintf("%s lacks install's edits (runs %s)", a.Pod, strings.Join(a.Runs, ", ")))
			}
		}
	}
	notCompared := ""
	if len(unread) > 0 {
		notCompared = " (" + strings.Join(unread, ", ") + ": not compared)"
	}
	switch {
	case len(live) == 1:
		r.Outcome, r.Found = Pass, "one control-plane node ("+live[0].Node+"): nothing to compare"
	case len(have)+len(lacking) < 2:
		r.Outcome, r.Found = Pass, fmt.Sprintf("%d control-plane nodes, fewer than two kube-apiserver mirror pods to compare%s", len(live), notCompared)
	case len(have) > 0 && len(lacking) > 0:
		if len(lacking) > shownNodes {
			lacks = append(lacks, fmt.Sprintf("and %d more", len(lacking)-shownNodes))
		}
		r.Outcome, r.Nodes = Fail, lacking
		r.Found = strings.Join(lacks, "; ") + " while " + nodeNames(have) + map[bool]string{true: " has", false: " have"}[len(have) == 1] + " them" + notCompared
		r.Action = "a kubeadm upgrade without --patches rendered the static pods on " + nodeNames(lacking) + " again: run install --control-plane-jobs again (or install --manifests-dir there), and " +
			steps.KubeadmUpgradeWithPatches + " (--kubeadm-patches-dir, /etc/kubernetes/patches by default)"
	case len(lacking) > 0:
		r.Outcome, r.Found = Pass, fmt.Sprintf("none of the %d control-plane nodes' kube-apiserver has install's edits (not installed yet, or undone on all of them: status says)%s", len(have)+len(lacking), notCompared)
	default:
		r.Outcome, r.Found = Pass, fmt.Sprintf("the kube-apiserver of every control-plane node (%d) has install's edits%s", len(have), notCompared)
	}
	return r, nil
}
