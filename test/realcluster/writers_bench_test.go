package realcluster

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// BenchmarkTunnelNodesWriters: five minutes of node churn (an edge Node
// added every 2 s, the one before deleted) on the OpenYurt cluster, whose
// yurt-tunnel-server runs its DNS controller, after install; who wrote
// yurt-tunnel-nodes how often comes from the apiserver's audit log, and a
// watch counts the writes that changed its text. Side by side in one run:
// install as it is (its tunnel-dns step switches the controller off) and
// with --skip tunnel-dns (both write). YURTDNS_CHURN sets the duration.
func BenchmarkTunnelNodesWriters(b *testing.B) {
	churn := 5 * time.Minute
	if d, err := time.ParseDuration(os.Getenv("YURTDNS_CHURN")); err == nil {
		churn = d
	}
	for _, v := range []struct {
		name string
		skip string
	}{{"sync-only", "control-plane"}, {"both-writers", "control-plane,tunnel-dns"}} {
		if out, err := runSync(b, "install", "--skip", v.skip); err != nil {
			b.Fatalf("install --skip %s: %v\n%s", v.skip, err, out)
		}
		changed := watchTextChanges(b)
		changes, writes := churnNodes(b, churn)
		textChanges := changed()
		b.Logf("%s: %s of churn, %d node changes: %s written %v (audit log), its text changed %d times",
			v.name, churn, changes, tunnelnodes.ConfigMapName, writes, textChanges)
		b.ReportMetric(float64(writes[syncUser]), v.name+"-sync-writes")
		b.ReportMetric(float64(writes["system:serviceaccount:kube-system:yurt-tunnel-server"]), v.name+"-tunnel-server-writes")
		b.ReportMetric(float64(textChanges), v.name+"-text-changes")
		if v.name == "sync-only" {
			checkOnlySyncWrites(b, changes, writes)
		}
		if out, err := runSync(b, "revert"); err != nil {
			b.Fatalf("revert: %v\n%s", err, out)
		}
	}
}

// watchTextChanges counts the updates of yurt-tunnel-nodes that changed
// its text, from now until the returned func is called.
func watchTextChanges(b *testing.B) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoreV1().ConfigMaps("kube-system").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + tunnelnodes.ConfigMapName})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan int)
	go func() {
		changes, last := 0, "\x00"
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Error {
				continue
			}
			text := cm.Data[tunnelnodes.ConfigMapKey]
			if last != "\x00" && text != last {
				changes++
			}
			last = text
		}
		done <- changes
	}()
	return func() int {
		cancel()
		w.Stop()
		return <-done
	}
}
