package harness

import (
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
)

// Proxy is a TCP proxy in front of the apiserver that a test can cut, to
// disconnect one binary while the apiserver keeps serving everyone else.
type Proxy struct {
	Addr   string
	target string

	mu       sync.Mutex
	listener net.Listener
	conns    map[net.Conn]struct{}
}

// ProxiedKubeconfig returns a copy of the kubeconfig at path whose server is
// a new Proxy to the apiserver; TLS passes through unchanged.
func (cp *ControlPlane) ProxiedKubeconfig(t TB, path string) (string, *Proxy) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := cp.newProxy(t)
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = p.Addr
		c.Server = u.String()
	}
	out := filepath.Join(t.TempDir(), "kubeconfig-proxied")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o600); err != nil {
		t.Fatal(err)
	}
	return out, p
}

// newProxy starts a Proxy to the apiserver on a free loopback port, cut
// when the test ends.
func (cp *ControlPlane) newProxy(t TB) *Proxy {
	t.Helper()
	p := &Proxy{target: cp.env.ControlPlane.APIServer.SecureServing.ListenAddr.HostPort(), conns: map[net.Conn]struct{}{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Addr = l.Addr().String()
	p.serve(l)
	t.Cleanup(p.Cut)
	return p
}

func (p *Proxy) serve(l net.Listener) {
	p.mu.Lock()
	p.listener = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *Proxy) pipe(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	go func() { _, _ = io.Copy(server, client); server.Close() }()
	_, _ = io.Copy(client, server)
	client.Close()
}

// track registers both ends, or closes them when the proxy was cut meanwhile.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener == nil {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener != nil {
		p.listener.Close()
		p.listener = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore accepts connections again on the same address.
func (p *Proxy) Restore(t TB) {
	t.Helper()
	l, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatalf("reopening proxy on %s: %v", p.Addr, err)
	}
	p.serve(l)
}
