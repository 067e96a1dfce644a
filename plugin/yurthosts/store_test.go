package yurthosts

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWatcherOnFakeClientset runs the watches on client-go's fake clientset
// (the typed List/Watch functions make that possible): the first lists mark
// the watcher synced, and a recreated Service and a deleted ConfigMap reach
// the published records.
func TestWatcherOnFakeClientset(t *testing.T) {
	const ns = "fake"
	src := source{configMapNamespace: ns, configMapName: "records", configMapKey: tunnelnodes.ConfigMapKey,
		serviceNamespace: ns, serviceName: "tunnel"}
	cm := annotatedCM("10.96.0.9\tedge-1\n192.168.0.2\tmaster-1", "10.96.0.9")
	cm.Namespace, cm.Name = ns, "records"
	svc := func(ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tunnel"},
			Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}}}
	}
	client := fake.NewClientset(cm, svc("10.96.0.9"))
	expect := watchFake(t, src, client)
	expect("edge-1.", "[10.96.0.9]")
	expect("master-1.", "[192.168.0.2]")

	ctx := context.Background()
	if err := client.CoreV1().Services(ns).Delete(ctx, "tunnel", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, svc("10.96.5.5"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("edge-1.", "[10.96.5.5]")

	if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, "records", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("edge-1.", "[]")
}

// TestWatcherFollowsShardsOnFakeClientset: with shards, the watcher serves
// the complete set and takes a shard's change; while a shard is missing it
// serves the single ConfigMap, and the set again once the shard is back.
func TestWatcherFollowsShardsOnFakeClientset(t *testing.T) {
	const ns, name = "fake", "sharded"
	ctx := context.Background()
	single := annotatedCM("10.96.0.9\tedge-1\n192.168.0.99\tmaster-1", "10.96.0.9")
	single.Namespace, single.Name = ns, name
	// Of a set of 2, edge-1 is in shard 0 and master-1 in shard 1.
	if tunnelnodes.ShardOf("edge-1", 2) != 0 || tunnelnodes.ShardOf("master-1", 2) != 1 {
		t.Fatal("the test's names moved shards")
	}
	trigger := time.Now()
	shard0 := shardCM(name, 2, 0, "10.96.0.9\tedge-1", "10.96.0.9", 1, trigger)
	shard1 := shardCM(name, 2, 1, "192.168.0.2\tmaster-1", "10.96.0.9", 2, trigger)
	client := fake.NewClientset(single, shard0, shard1)
	expect := watchFake(t, source{configMapNamespace: ns, configMapName: name, configMapKey: tunnelnodes.ConfigMapKey,
		shardsNamespace: testShardsNamespace}, client)
	shards := client.CoreV1().ConfigMaps(testShardsNamespace)
	// The set answers 192.168.0.2, the single ConfigMap 192.168.0.99.
	expect("master-1.", "[192.168.0.2]")
	if _, err := shards.Update(ctx, shardCM(name, 2, 1, "192.168.0.3\tmaster-1", "10.96.0.9", 3, trigger), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("master-1.", "[192.168.0.3]")
	if err := shards.Delete(ctx, shard0.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("master-1.", "[192.168.0.99]") // a shard missing: the single ConfigMap
	if _, err := shards.Create(ctx, shardCM(name, 2, 0, "10.96.0.9\tedge-1", "10.96.0.9", 4, trigger), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("master-1.", "[192.168.0.3]") // the set again
	// Set before the records are published: a scrape after an answer agrees.
	if got := testutil.ToFloat64(shardsServed.WithLabelValues(ns + "/" + name)); got != 2 {
		t.Errorf("shards served %v, want 2", got)
	}
}

// watchFake runs a watcher of src on client until the test ends, and
// returns once it synced; expect waits up to 5 s for name's A answer to be
// want (the addresses as fmt prints them).
func watchFake(t *testing.T, src source, client *fake.Clientset) (expect func(name, want string)) {
	t.Helper()
	var published atomic.Pointer[records]
	published.Store(emptyRecords)
	w := newWatcher(src, client, published.Store)
	w.start()
	t.Cleanup(w.stop)
	w.waitForSync(10 * time.Second)
	if !w.hasSynced() {
		t.Fatal("not synced after the first lists")
	}
	return func(name, want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			h, _ := published.Load().host(name)
			got := fmt.Sprint(h.v4)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s, want %s", name, got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
