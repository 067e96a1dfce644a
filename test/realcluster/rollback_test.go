package realcluster

import (
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/cluster"
)

// BenchmarkControlPlaneRollback: a kube-apiserver patch it cannot start
// with (a flag it does not know, added through install's hidden test-only
// flag) is rolled back like kubeadm upgrade does: the backup manifest is
// restored, the apiserver comes back, and install exits non-zero naming
// it, before it touches the next control-plane node. Revert then restores
// the rest exactly. An install and a revert across three control-plane
// nodes (about 4 minutes): in make bench; make test's e2e
// TestControlPlaneLiveAndRollback and steps' TestControlPlaneJobsOneNodeAtATime
// hold the same logic against envtest.
func BenchmarkControlPlaneRollback(b *testing.B) {
	for range b.N {
		controlPlaneRollback(b)
	}
}

func controlPlaneRollback(t testing.TB) {
	before := kubeadmState(t)
	out, err := runSync(t, "install", "--control-plane-jobs", "--timeout", "60s",
		"--test-only-extra-flag", "kube-apiserver=--no-such-flag-yurtdns-rollback-test")
	if err == nil {
		t.Fatalf("install with an apiserver that cannot start succeeded:\n%s", out)
	}
	if !strings.Contains(out, "kube-apiserver") || !strings.Contains(out, "restored") {
		t.Errorf("install's error does not name kube-apiserver and its restored manifest:\n%s", out)
	}
	// One node at a time: the first one's failure stops the step before
	// the others' apiservers are touched.
	if !strings.Contains(out, "not started on master-2, master-3") {
		t.Errorf("install's error does not say that master-2 and master-3 were left untouched:\n%s", out)
	}
	for _, n := range kc.ControlPlanes()[1:] {
		if manifest := "manifest/" + n.Name + "/kube-apiserver.yaml"; kubeadmState(t)[manifest] != before[manifest] {
			t.Errorf("%s's kube-apiserver manifest changed by an install that failed on master-1", n.Name)
		}
	}
	if _, err := kc.WaitPod(t.Context(), "kube-apiserver-"+kc.Master().Name, 2*time.Minute, cluster.PodReady); err != nil {
		t.Fatalf("kube-apiserver after the rollback: %v", err)
	}
	checkStaticPod(t, "kube-apiserver", "--authorization-mode")
	if kc.Master().StaticPodManifestContains("kube-apiserver", "no-such-flag") {
		t.Error("the bad flag is still in kube-apiserver's manifest")
	}
	for _, n := range kc.Nodes {
		if err := n.WaitDNS(t.Context(), probeName, 0); err != nil {
			t.Error(err)
		}
	}
	revertExactly(t, before)
}
