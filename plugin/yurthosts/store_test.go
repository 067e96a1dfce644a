package yurthosts

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

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
	var published atomic.Pointer[records]
	published.Store(emptyRecords)
	w := newWatcher(src, client, published.Store)
	w.start()
	t.Cleanup(w.stop)
	w.waitForSync(10 * time.Second)
	if !w.hasSynced() {
		t.Fatal("not synced after the first lists")
	}

	expect := func(name, want string) {
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
