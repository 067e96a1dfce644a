package yurthosts

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// offlineYurthub answers as yurthub's local proxy does while the cloud is
// away: a LIST from its cache, and any WATCH with 200 and then nothing (no
// initial events, no bookmark) until the client gives up. It counts the
// watches that asked for initial events (a watch-list).
func offlineYurthub(t *testing.T, cm *corev1.ConfigMap, svc *corev1.Service) (*httptest.Server, *atomic.Int64) {
	var watchLists atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") == "true" {
			if q.Get("sendInitialEvents") == "true" {
				watchLists.Add(1)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		var list any
		switch r.URL.Path {
		case "/api/v1/namespaces/" + cm.Namespace + "/configmaps":
			list = &corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"},
				ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: []corev1.ConfigMap{*cm}}
		case "/api/v1/namespaces/" + svc.Namespace + "/services":
			list = &corev1.ServiceList{TypeMeta: metav1.TypeMeta{Kind: "ServiceList", APIVersion: "v1"},
				ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: []corev1.Service{*svc}}
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(list); err != nil {
			t.Error(err)
		}
	}))
	// Open watches end before the server closes.
	t.Cleanup(srv.Close)
	return srv, &watchLists
}

// TestWatcherSyncsFromOfflineYurthub: with client-go's WatchListClient gate
// on (its default since 0.35), the watcher still LISTs first, so it syncs
// from a yurthub that serves only its cache, where a watch-list would wait
// forever.
func TestWatcherSyncsFromOfflineYurthub(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
	cm := annotatedCM("10.96.0.9\tedge-1\n192.168.0.2\tmaster-1", "10.96.0.9")
	cm.Namespace, cm.Name = tunnelnodes.Namespace, tunnelnodes.ConfigMapName
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: tunnelnodes.ServiceName},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.9", ClusterIPs: []string{"10.96.0.9", "fd00:10:96::9"}}}
	srv, watchLists := offlineYurthub(t, cm, svc)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})

	var published atomic.Pointer[records]
	published.Store(emptyRecords)
	w := newWatcher(source{configMapNamespace: cm.Namespace, configMapName: cm.Name, configMapKey: tunnelnodes.ConfigMapKey,
		serviceNamespace: svc.Namespace, serviceName: svc.Name}, client, published.Store)
	start := time.Now()
	w.start()
	t.Cleanup(w.stop)
	w.waitForSync(5 * time.Second)
	if !w.hasSynced() {
		t.Fatalf("not synced after 5 s from a cache-only server (%d watch-list requests)", watchLists.Load())
	}
	t.Logf("synced in %s", time.Since(start).Round(time.Millisecond))
	if n := watchLists.Load(); n != 0 {
		t.Errorf("%d watch-list requests (sendInitialEvents=true), want LIST then WATCH only", n)
	}
	h, _ := published.Load().host("edge-1.")
	if got := fmt.Sprint(h.v4, h.v6); got != "[10.96.0.9] [fd00:10:96::9]" {
		t.Errorf("edge-1: %s, want the tunnel Service's two ClusterIPs", got)
	}
}
