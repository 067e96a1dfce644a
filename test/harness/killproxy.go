package harness

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// KillProxy stands between a process under test and the apiserver and
// SIGKILLs the process at the request its KillRule picks, while the process
// is blocked on that request: the kill point is exact, not raced (a watch
// would see the moment milliseconds later, by which time the process has
// made its next few writes). Requests are forwarded one at a time, so the
// process makes no progress while one is held. After the kill it forwards
// nothing. With a zero KillRule it only forwards, recording the writes.
type KillProxy struct {
	// Kubeconfig points a process at the proxy.
	Kubeconfig string

	process chan *Process
	base    http.RoundTripper
	rule    KillRule

	mu     sync.Mutex
	killed string   // where, once killed
	writes []string // the writes the apiserver accepted, "METHOD path"
}

// KillRule picks the request to kill at. Each function returns where the
// process was killed ("" to go on); what is the request, "METHOD path".
type KillRule struct {
	// BeforeSend is asked before a request is forwarded: a kill here means
	// the apiserver never sees it.
	BeforeSend func(req *http.Request, what string, write bool) (where string)
	// AfterWrite is asked once the apiserver accepted a write.
	AfterWrite func(req *http.Request, what string) (where string)
}

// NewKillProxy starts a proxy to cp's apiserver, with cp's credentials.
func NewKillProxy(t TB, cp *ControlPlane, rule KillRule) *KillProxy {
	t.Helper()
	base, err := rest.TransportFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cp.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	if target.Scheme == "" {
		target, _ = url.Parse("https://" + cp.Config.Host)
	}
	kp := &KillProxy{process: make(chan *Process, 1), base: base, rule: rule}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: kp,
		ErrorLog:  log.New(io.Discard, "", 0),
	})
	t.Cleanup(srv.Close)
	kp.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q}}]
users: [{name: proxy, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
current-context: proxy
`, srv.URL)
	if err := os.WriteFile(kp.Kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return kp
}

// Attach names the process to kill (the one started with Kubeconfig).
func (kp *KillProxy) Attach(p *Process) { kp.process <- p }

// KilledAt says where the process was killed, "" while it was not.
func (kp *KillProxy) KilledAt() string {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	return kp.killed
}

// Written returns the writes the apiserver accepted so far, in order.
func (kp *KillProxy) Written() []string {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	return slices.Clone(kp.writes)
}

var errKilled = fmt.Errorf("the process was killed")

// RoundTrip forwards one request of the process.
func (kp *KillProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if kp.killed != "" {
		return nil, errKilled
	}
	write := req.Method != http.MethodGet && req.Method != http.MethodHead
	what := req.Method + " " + req.URL.Path
	if kp.rule.BeforeSend != nil {
		if where := kp.rule.BeforeSend(req, what, write); where != "" {
			kp.kill(where)
			return nil, errKilled
		}
	}
	resp, err := kp.base.RoundTrip(req)
	if err != nil || !write || resp.StatusCode >= 300 {
		return resp, err
	}
	kp.writes = append(kp.writes, what)
	if kp.rule.AfterWrite != nil {
		if where := kp.rule.AfterWrite(req, what); where != "" {
			kp.kill(where)
		}
	}
	return resp, nil
}

// kill sends SIGKILL and waits until the process is gone.
func (kp *KillProxy) kill(where string) {
	p := <-kp.process
	kp.process <- p
	_ = p.Signal(syscall.SIGKILL)
	for deadline := time.Now().Add(30 * time.Second); !p.Exited() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	kp.killed = where
}
