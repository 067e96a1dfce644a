package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestKubeletConfigzBadRequest: a 400 from the node proxy keeps the
// apiserver's reason, and "address not allowed" (a node name that resolves
// to a loopback address where the apiserver runs) names the /etc/hosts
// line, whether the apiserver wrote a Status or plain text.
func TestKubeletConfigzBadRequest(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		refused                 bool
		want                    string
	}{
		{"status", "application/json", `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"address not allowed","reason":"BadRequest","code":400}`, true, "127.0.1.1 master-1"},
		{"plain text", "text/plain", "address not allowed\n", true, "127.0.1.1 master-1"},
		{"other", "text/plain", "invalid node request \"master-1:x:y\"\n", false, "invalid node request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/nodes/master-1/proxy/configz" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			_, err = KubeletConfigz(context.Background(), cs, "master-1")
			var refused *NodeNameNotProxyableError
			if got := errors.As(err, &refused); got != tc.refused {
				t.Fatalf("NodeNameNotProxyableError: %v, want %v (error %v)", got, tc.refused, err)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestKubeletConfigzNoAnswer: a node proxy that never answers (a tunnel
// whose agent lost its connection) ends in an error that names the node,
// not a wait without end.
func TestKubeletConfigzNoAnswer(t *testing.T) {
	defer func(d time.Duration) { configzTimeout = d }(configzTimeout)
	configzTimeout = 50 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = KubeletConfigz(context.Background(), cs, "worker-1")
	if err == nil || !strings.Contains(err.Error(), "node worker-1's /configz gave no answer") {
		t.Errorf("error %v, want it to say that worker-1's /configz gave no answer", err)
	}
}
