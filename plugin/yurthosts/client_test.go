package yurthosts

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A token the apiserver refuses is read again from its file on the next
// request, not a minute later: the kubelet has replaced yurthub's made-up
// token of a pod that started while its node was cut off.
func TestTokenReadAgainAfter401(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("made-up"), 0o600); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer real" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
	}))
	defer api.Close()
	// HTTPS: clientcmd sends no credentials to a plain-HTTP server.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+api.URL+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {tokenFile: "`+tokenFile+`"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, err := source{kubeconfig: kubeconfig}.client()
	if err != nil {
		t.Fatal(err)
	}
	list := func() error {
		_, err := cs.CoreV1().ConfigMaps("kube-system").List(context.Background(), metav1.ListOptions{})
		return err
	}
	if err := list(); err == nil {
		t.Fatal("the made-up token was accepted")
	}
	if err := os.WriteFile(tokenFile, []byte("real"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first request after the change may still carry the token it read
	// for the refused one (client-go resets only tokens older than a request).
	for i := range 3 {
		if err := list(); err == nil {
			return
		} else if i == 2 {
			t.Fatalf("still refused three requests after the token file changed: %v", err)
		}
	}
}

// With yurthub asked for, the client reads through its proxy with no
// credentials when its health check answers 200 and its proxy takes a
// connection as the server starts, and with the kubeconfig's token
// otherwise (no yurthub on the node, one that is not well, or one whose
// proxy listens elsewhere).
func TestClientThroughYurthubWhenItAnswers(t *testing.T) {
	seen := make(chan string, 1)
	answer := func(server string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			select {
			case seen <- fmt.Sprintf("%s %q", server, r.Header.Get("Authorization")):
			default:
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
		}
	}
	yurthubProxy := httptest.NewServer(answer("yurthub"))
	defer yurthubProxy.Close()
	api := httptest.NewTLSServer(answer("apiserver"))
	defer api.Close()
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("OK")) }))
	defer healthy.Close()
	unwell := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer unwell.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // its port now refuses connections

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+api.URL+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: pod-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, healthz, proxy, wantRequest string
	}{
		{"yurthub healthy", healthy.URL + "/v1/healthz", yurthubProxy.URL, `yurthub ""`},
		{"yurthub not ready", unwell.URL + "/v1/healthz", yurthubProxy.URL, `apiserver "Bearer pod-token"`},
		{"yurthub's proxy elsewhere", healthy.URL + "/v1/healthz", gone.URL, `apiserver "Bearer pod-token"`},
		{"no yurthub", gone.URL + "/v1/healthz", yurthubProxy.URL, `apiserver "Bearer pod-token"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := source{kubeconfig: kubeconfig, yurthubProxy: tc.proxy, yurthubHealthz: tc.healthz}.client()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.CoreV1().ConfigMaps("kube-system").List(context.Background(), metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := <-seen; got != tc.wantRequest {
				t.Errorf("request to %s, want to %s", got, tc.wantRequest)
			}
		})
	}
}
