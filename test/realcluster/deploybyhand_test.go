package realcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeployByHand: `kubectl apply -k` of each deploy/ package that runs
// pods, as the README offers it to those who apply by hand, with the
// images make image wrote imported on every node as the README says (the
// cluster imports them so): every pod runs the image of this release
// (the VERSION file), fully qualified, pulled only if not present, and
// nothing is pulled. Then `kubectl delete -k` in reverse order and the
// sync's Lease deleted leave the cluster as kubeadm made it; the caches'
// address and nftables table, which their init container sets up on each
// node, are taken off with
// the sync's own node-local-dns teardown, as revert's Jobs do.
// (deploy/monitoring runs no pod and needs prometheus-operator's CRDs;
// deploy/raven needs Raven's layout; deploy/node-local-dns-leftover is
// revert's to pin to nodes: TestInstallAndRevert runs it.)
func TestDeployByHand(t *testing.T) {
	ctx := context.Background()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	tag := ":" + strings.TrimSpace(string(version))
	coreDNS, sync := "docker.io/yurtdns/coredns-yurt"+tag, "docker.io/yurtdns/tunnel-nodes-sync"+tag
	packages := []struct {
		dir, workload, selector string
		// images are each container's, by name (the caches' setup is the
		// sync's node-local-dns command).
		images map[string]string
	}{
		{dir: "records"},
		{"tunnel-nodes-sync", "deployment/tunnel-nodes-sync", "app.kubernetes.io/name=tunnel-nodes-sync", map[string]string{"tunnel-nodes-sync": sync}},
		{"coredns-yurt", "daemonset/coredns", "k8s-app=kube-dns", map[string]string{"coredns": coreDNS}},
		{"node-local-dns", "daemonset/node-local-dns", "k8s-app=node-local-dns", map[string]string{"setup": sync, "coredns": coreDNS}},
	}
	applied := 0
	defer func() {
		for i := applied - 1; i >= 0; i-- {
			if out, err := kc.Kubectl(ctx, "delete", "-k", filepath.Join(root, "deploy", packages[i].dir), "--wait", "--timeout=3m"); err != nil {
				t.Errorf("kubectl delete -k deploy/%s: %v\n%s", packages[i].dir, err, out)
			}
		}
		// As docs/install.md says: the sync's pod lost its RBAC with the
		// rest and could not release its Lease.
		if out, err := kc.Kubectl(ctx, "-n", tunnelnodes.Namespace, "delete", "lease", tunnelnodes.LeaderElectionID, "--ignore-not-found"); err != nil {
			t.Errorf("kubectl delete lease %s: %v\n%s", tunnelnodes.LeaderElectionID, err, out)
		}
		for _, n := range kc.Nodes {
			if out, err := n.NetCommand(ctx, syncBin, "node-local-dns", "teardown", "--address", nodelocal.Address.String(), "--interface", "lo").CombinedOutput(); err != nil {
				t.Errorf("node-local-dns teardown on %s: %v\n%s", n.Name, err, out)
			}
		}
		waitOnlyKubeadmCoreDNS(t)
	}()
	for _, p := range packages {
		started := time.Now()
		if out, err := kc.Kubectl(ctx, "apply", "-k", filepath.Join(root, "deploy", p.dir)); err != nil {
			t.Fatalf("kubectl apply -k deploy/%s: %v\n%s", p.dir, err, out)
		}
		applied++
		if p.workload == "" {
			continue
		}
		if out, err := kc.Kubectl(ctx, "-n", "kube-system", "rollout", "status", p.workload, "--timeout=3m"); err != nil {
			t.Fatalf("deploy/%s: %v\n%s", p.dir, err, out)
		}
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: p.selector})
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, pod := range pods.Items {
			if len(pod.OwnerReferences) == 0 || pod.OwnerReferences[0].Kind == "ReplicaSet" && p.dir == "coredns-yurt" {
				continue // kubeadm's CoreDNS Deployment shares the label
			}
			for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
				if want := p.images[c.Name]; c.Image != want || c.ImagePullPolicy != "IfNotPresent" {
					t.Errorf("deploy/%s: pod %s container %s runs %s (%s), want %q (IfNotPresent)", p.dir, pod.Name, c.Name, c.Image, c.ImagePullPolicy, want)
				}
			}
			if pod.Status.Phase == "Running" {
				running++
			}
		}
		if running == 0 {
			t.Errorf("deploy/%s: no pod of %s running", p.dir, p.workload)
		}
		t.Logf("kubectl apply -k deploy/%s: %s rolled out in %s, %d pods running %v", p.dir, p.workload, time.Since(started).Round(100*time.Millisecond), running, p.images)
	}
	if out, _ := kc.Kubectl(ctx, "-n", "kube-system", "get", "events", "--field-selector", "reason=Pulling", "-o", "jsonpath={.items[*].message}"); strings.Contains(out, "yurtdns/") {
		t.Errorf("a kubelet pulled a yurtdns image: %s", out)
	}
}

// waitOnlyKubeadmCoreDNS waits until the pods behind kube-dns are kubeadm's
// Deployment's alone again.
func waitOnlyKubeadmCoreDNS(t *testing.T) {
	harness.Eventually(t, 3*time.Minute, func() error {
		pods, err := cs.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app in (kube-dns,node-local-dns)"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if len(p.OwnerReferences) == 0 || p.OwnerReferences[0].Kind != "ReplicaSet" {
				return fmt.Errorf("pod %s (%s) still there", p.Name, p.Labels)
			}
		}
		return nil
	})
}
