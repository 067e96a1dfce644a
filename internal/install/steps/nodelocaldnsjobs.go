package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The node-local-dns step's per-node Jobs run a `node-local-dns` action on
// one node: switch-kubelet and restore-kubelet edit the kubelet's
// config.yaml (the original kept next to it) and restart the kubelet;
// teardown undoes the DaemonSet's setup once the caches are gone.
const (
	hostKubeletDir = "/var/lib/kubelet"
	kubeletMount   = "/host/var/lib/kubelet"
)

// nodeLocalAction is a node-local-dns subcommand and what its Job needs.
type nodeLocalAction struct {
	name string
	// kubelet: it edits the kubelet's file and restarts the kubelet, so it
	// mounts the kubelet's directory, shares the node's PID namespace, and
	// adds KILL (signal the kubelet) and SYS_PTRACE (read which network
	// namespace a process is in); otherwise it changes the node's network
	// (NET_ADMIN).
	kubelet bool
}

var (
	switchKubelet  = nodeLocalAction{name: "switch-kubelet", kubelet: true}
	restoreKubelet = nodeLocalAction{name: "restore-kubelet", kubelet: true}
	teardownNode   = nodeLocalAction{name: "teardown"}
)

func kubeletRecordKey(node string) string { return "kubelet " + node }

// kubeletJob runs `node-local-dns ACTION` on node, in the node's network
// namespace (the cache's address, the kubelet's healthz on localhost), as
// root (the kubelet's files are root's; nftables), with only what the
// action needs.
// It passes one --address per node-local address of addrs, in order.
func kubeletJob(node string, a nodeLocalAction, image string, o engine.Options, addrs []netip.Addr) *batchv1.Job {
	args := []string{"node-local-dns", a.name}
	for _, addr := range addrs {
		args = append(args, "--address", addr.String())
	}
	h := kube.HostJob{Name: fmt.Sprintf("yurtdns-%s-%s", a.name, kube.NodeHash(node)), Node: node, Action: a.name, Container: a.name, Image: image,
		Args:        append(args, "--interface", "lo", "--timeout", o.Timeout.String()),
		Add:         []corev1.Capability{"NET_ADMIN"},
		HostNetwork: true}
	if a.kubelet {
		h.Args = append(h.Args, "--kubelet-dir", kubeletMount)
		h.Add = []corev1.Capability{"KILL", "SYS_PTRACE"}
		h.HostPID, h.HostDir, h.Mount = true, hostKubeletDir, kubeletMount
	}
	return h.Job()
}

// runKubeletJob runs one node's Job to completion and deletes it; a Job
// that failed earlier is deleted first (running install or revert again
// is the retry).
func runKubeletJob(ctx context.Context, env *engine.Env, ss *engine.StepState, node string, a nodeLocalAction, image string, addrs []netip.Addr) error {
	job := kube.ToUnstructured(kubeletJob(node, a, image, env.Options, addrs), "batch/v1", "Job")
	if err := kube.DeleteFailedJob(ctx, env, job.GetName()); err != nil {
		return err
	}
	if _, _, err := kube.EnsureCreated(ctx, env, ss, job); err != nil {
		return err
	}
	if err := kube.WaitJobComplete(ctx, env, job.GetName()); err != nil {
		return err
	}
	_, err := kube.DeleteCreated(ctx, env, ss, job)
	delete(ss.Records, kube.ObjectKey(job))
	return err
}

// waitSwitchJobGone waits for a switch Job an interrupted install left on
// node to stop (done or failed), then deletes it: the restore comes after.
func waitSwitchJobGone(ctx context.Context, env *engine.Env, ss *engine.StepState, node string, rec *engine.KubeletRecord) error {
	job := kube.ToUnstructured(kubeletJob(node, switchKubelet, rec.Image, env.Options, recordedAddresses(rec)), "batch/v1", "Job")
	if rec, ok := ss.Records[kube.ObjectKey(job)]; !ok || !rec.Created {
		return nil
	}
	err := kubewait.For(ctx, kube.JobTimeout(env), "switch Job "+job.GetName()+" from the interrupted install still running", func(ctx context.Context) (bool, string, error) {
		j := &batchv1.Job{}
		if err := env.Client.Get(ctx, kube.Key(job.GetName()), j); err != nil {
			return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
		}
		why, err := kube.JobFailure(ctx, env, j)
		return kube.JobCondition(j, batchv1.JobComplete) || why != "", "", err
	})
	if err != nil {
		return err
	}
	_, err = kube.DeleteCreated(ctx, env, ss, job)
	delete(ss.Records, kube.ObjectKey(job))
	return err
}

// runningKubelet is what the node's kubelet runs with, from its /configz
// through the apiserver: its clusterDNS (what a new pod's resolv.conf gets)
// and its feature gates.
type runningKubelet struct {
	ClusterDNS   []string        `json:"clusterDNS"`
	FeatureGates map[string]bool `json:"featureGates"`
}

func readRunningKubelet(ctx context.Context, env *engine.Env, node string) (runningKubelet, error) {
	raw, err := kube.KubeletConfigz(ctx, env.Clientset, node)
	if err != nil {
		return runningKubelet{}, fmt.Errorf("reading the kubelet configuration of node %s: %w", node, err)
	}
	var cfg struct {
		KubeletConfig runningKubelet `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return runningKubelet{}, fmt.Errorf("node %s's /configz: %w", node, err)
	}
	return cfg.KubeletConfig, nil
}

func runningClusterDNS(ctx context.Context, env *engine.Env, node string) ([]string, error) {
	k, err := readRunningKubelet(ctx, env, node)
	return k.ClusterDNS, err
}
