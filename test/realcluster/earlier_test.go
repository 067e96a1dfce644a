package realcluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// earlierCommit is yurtdns from before v0.1.0 and before the node-local
// Corefile answered the cluster's zones itself (628bd26), so that the
// self-upgrade moves real content, not only images.
const earlierCommit = "7080c21"

// earlierYurtdns is earlierCommit's tunnel-nodes-sync and its two images.
type earlierYurtdns struct {
	bin                     string
	archives                []string
	coreDNSImage, syncImage string
}

// earlier is built by TestMain beside the cluster's start, when
// BenchmarkUpgradeFromEarlier is to run.
var earlier = make(chan earlierResult, 1)

type earlierResult struct {
	earlierYurtdns
	err error
}

// buildEarlier builds earlierCommit's binaries and, with today's
// hack/image, their images for this machine's platform into dir.
func buildEarlier(root, dir string) (earlierYurtdns, error) {
	bins, err := harness.BuildAt(earlierCommit, dir, "tunnel-nodes-sync", "coredns-yurt")
	if err != nil {
		return earlierYurtdns{}, err
	}
	e := earlierYurtdns{bin: bins[0],
		syncImage:    "docker.io/yurtdns/tunnel-nodes-sync:" + earlierCommit,
		coreDNSImage: "docker.io/yurtdns/coredns-yurt:" + earlierCommit}
	for _, img := range []struct {
		bin, ref string
		args     []string
	}{
		{bins[0], e.syncImage, []string{"--entrypoint", "/tunnel-nodes-sync", "--ports", "8080/tcp,8081/tcp"}},
		{bins[1], e.coreDNSImage, []string{"--entrypoint", "/coredns", "--bind-low-ports", "--ports", "53/udp,53/tcp,9153/tcp"}},
	} {
		out := filepath.Join(dir, filepath.Base(img.bin)+".oci.tar")
		cmd := exec.Command("go", append([]string{"run", "./hack/image", "--binary", "linux/" + runtime.GOARCH + "=" + img.bin,
			"--ref", img.ref, "--out", out}, img.args...)...)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return earlierYurtdns{}, fmt.Errorf("image %s: %v\n%s", img.ref, err, msg)
		}
		e.archives = append(e.archives, out)
	}
	return e, nil
}

// earlierOnNodes is the earlier build, its images imported on every node.
func earlierOnNodes(t testing.TB) earlierYurtdns {
	t.Helper()
	r := <-earlier
	earlier <- r
	if r.err != nil {
		t.Fatalf("yurtdns at %s: %v", earlierCommit, r.err)
	}
	for _, n := range kc.Nodes {
		if err := n.ImportImages(r.archives...); err != nil {
			t.Fatal(err)
		}
	}
	return r.earlierYurtdns
}

// BenchmarkUpgradeFromEarlier: yurtdns as earlierCommit installs it
// (control plane and NodeLocal DNS; it patched every control-plane node at
// once, so its API figures are logged, not held), then this version's
// install over it, in place: DNS from pods made before it and under its
// node-local DNS answers all along, the API through the load balancer
// too, no static pod restarts, every DNS pod runs this version, and a
// dry-run finds nothing left to do; then revert. Two installs and a revert
// across three control-plane nodes (about 10 minutes): in make bench;
// make test's TestKubeadmUpgrade installs this version on a cluster without
// yurtdns (its Prometheus checks need one), and the e2e
// TestInstallUpgradesInPlace holds install over an earlier version's
// objects against envtest.
func BenchmarkUpgradeFromEarlier(b *testing.B) {
	for range b.N {
		upgradeFromEarlier(b)
	}
}

func upgradeFromEarlier(t testing.TB) {
	e := earlierOnNodes(t)
	before := []podNetns{startPausePod(t, "earlier-m1", "master-1"), startPausePod(t, "earlier-w1", "worker-1")}
	probes := startProbe("", probeName, "", askers(before))
	install := func(bin string, args ...string) {
		t.Helper()
		started := time.Now()
		out, err := runSyncBin(t, bin, args...)
		if err != nil && strings.Contains(out, "the object has been modified") {
			// earlierCommit updates yurt-tunnel-server's Deployment without
			// retrying a conflict (its status changes while the control-plane
			// step restarts kube-apiserver; b908cb2 retries): its user runs
			// install again, which picks up where it stopped.
			t.Logf("%s: a write conflict; run again, as its user would", strings.Join(args, " "))
			_, err = runSyncBin(t, bin, args...)
		}
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		t.Logf("%s took %s", strings.Join(args, " "), time.Since(started).Round(100*time.Millisecond))
	}
	api := startAPIProbe(t)
	install(e.bin, "install", "--control-plane-jobs", "--node-local-dns", "--coredns-image", e.coreDNSImage, "--sync-image", e.syncImage)
	api.report(t, "install of "+earlierCommit)
	probes.finish(t, "install --node-local-dns of "+earlierCommit+", asked from pods made before it")

	after := []podNetns{startPausePod(t, "earlier-local-m1", "master-1"), startPausePod(t, "earlier-local-w1", "worker-1")}
	upgrading := startUpgradeProbes(slices.Concat(before, after))
	static, localPods := staticPodHashes(t), podUIDs(t, after)
	api = startAPIProbe(t)
	install(syncBin, "install", "--control-plane-jobs", "--node-local-dns")
	checkOneControlPlaneNodeAtATime(t, api.finish(t, "yurtdns upgraded from "+earlierCommit), "yurtdns upgraded from "+earlierCommit)
	upgrading.finish(t, "yurtdns upgraded from "+earlierCommit+", asked from pods made before it and under its node-local DNS")
	checkSelfUpgrade(t, static, localPods)

	probes = startProbe("", probeName, "", askers(slices.Concat(before, after)))
	out, err := runSync(t, "revert")
	probes.finish(t, "revert after the upgrade from "+earlierCommit)
	if err != nil {
		t.Fatalf("revert: %v", err)
	}
	checkLeftover(t, out, after)
}

// staticPodHashes are the config hashes the kubelets give the control-plane
// nodes' static pods' mirror pods: a hash changes when the pod restarts with
// a new manifest.
func staticPodHashes(t testing.TB) map[string]string {
	t.Helper()
	hashes := map[string]string{}
	for _, n := range kc.ControlPlanes() {
		for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			p, err := cs.CoreV1().Pods("kube-system").Get(context.Background(), c+"-"+n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			hashes[p.Name] = p.Annotations["kubernetes.io/config.hash"]
		}
	}
	return hashes
}

func podUIDs(t testing.TB, pods []podNetns) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for _, p := range pods {
		pod, err := cs.CoreV1().Pods("kube-system").Get(context.Background(), p.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[p.name] = pod.UID
	}
	return uids
}

// checkSelfUpgrade: after this version's install over earlierCommit's, no static pod restarted (their patches are the same),
// the pods made under the earlier node-local DNS still run, every DNS pod
// runs this version's image, and install finds nothing left to change.
func checkSelfUpgrade(t testing.TB, static map[string]string, localPods map[string]types.UID) {
	ctx := context.Background()
	if now := staticPodHashes(t); !maps.Equal(now, static) {
		t.Errorf("static pods restarted by the upgrade: config hashes %v, before %v", now, static)
	}
	for name, uid := range localPods {
		p, err := cs.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.UID != uid || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s, made under %s's node-local DNS, after the upgrade: %v", name, earlierCommit, err)
		}
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	v, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	for selector, image := range map[string]string{
		"k8s-app=kube-dns":                         "docker.io/yurtdns/coredns-yurt:" + version,
		"k8s-app=node-local-dns":                   "docker.io/yurtdns/coredns-yurt:" + version,
		"app.kubernetes.io/name=tunnel-nodes-sync": "docker.io/yurtdns/tunnel-nodes-sync:" + version,
	} {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			running++
			if got := p.Spec.Containers[0].Image; got != image {
				t.Errorf("pod %s (on %s, %s, made %s) runs %s, want %s", p.Name, p.Spec.NodeName, p.Status.Phase,
					p.CreationTimestamp.Format(time.TimeOnly), got, image)
			}
		}
		if running == 0 {
			t.Errorf("no pod of %s", selector)
		}
	}
	// A fresh install of this version would apply nothing else.
	dry, err := runSyncQuiet(t, "install", "--control-plane-jobs", "--node-local-dns", "--dry-run")
	if err != nil || regexp.MustCompile(`(?m)^\s*(\+\+\+|---) `).MatchString(dry) {
		// The steps that found nothing are left out: the digest CI shows keeps 20 lines a message.
		changes := slices.DeleteFunc(strings.Split(dry, "\n"), func(l string) bool {
			return strings.Contains(l, "] already applied") || strings.Contains(l, "] skipped: ")
		})
		t.Errorf("install --dry-run after the upgrade still finds changes (%v):\n%s", err, strings.Join(changes, "\n"))
	}
	status, err := runSyncQuiet(t, "status")
	if err != nil || !strings.Contains(status, "yurtdns "+version+" installed") || strings.Contains(status, "drifted") {
		t.Errorf("status after the upgrade must show %s installed, every step applied (exit %v):\n%s", version, err, status)
	}
}
