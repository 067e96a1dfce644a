package yurthosts

import (
	"context"
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
