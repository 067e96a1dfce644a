package harness

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CoreDNS is a running coredns-yurt binary.
type CoreDNS struct {
	*Process
	// DNSAddr is "127.0.0.1:PORT" (UDP and TCP).
	DNSAddr string
	// HealthURL, ReadyURL and MetricsURL are the health, ready and prometheus plugins' endpoints.
	HealthURL, ReadyURL, MetricsURL string
	// Corefile is the path of the Corefile the server runs.
	Corefile string
}

// CorefileVars are substituted into a Corefile template: {{.DNSPort}},
// {{.HealthAddr}}, {{.ReadyAddr}}, {{.MetricsAddr}}, {{.Kubeconfig}}.
type CorefileVars struct {
	DNSPort                            int
	HealthAddr, ReadyAddr, MetricsAddr string
	Kubeconfig                         string
}

func (v CorefileVars) expand(tmpl string) string {
	return strings.NewReplacer(
		"{{.DNSPort}}", fmt.Sprint(v.DNSPort),
		"{{.HealthAddr}}", v.HealthAddr,
		"{{.ReadyAddr}}", v.ReadyAddr,
		"{{.MetricsAddr}}", v.MetricsAddr,
		"{{.Kubeconfig}}", v.Kubeconfig,
	).Replace(tmpl)
}

// CoreDNSOptions tune how coredns-yurt is started.
type CoreDNSOptions struct {
	// CPUs, when set, pins the server to these CPUs with taskset (e.g. "0").
	CPUs string
	// ReadyTimeout defaults to 30 s.
	ReadyTimeout time.Duration
	// Executable, when set, runs the binary under this file name (a
	// symlink), e.g. "coredns" as the image's /coredns: client-go's default
	// User-Agent, which yurthub picks its cache agents by, is the name.
	Executable string
}

// StartCoreDNS writes the Corefile template with free loopback ports and the
// given kubeconfig, starts coredns-yurt on it and waits until /ready answers.
func StartCoreDNS(t TB, kubeconfig, corefileTemplate string, opts ...CoreDNSOptions) *CoreDNS {
	t.Helper()
	v := CorefileVars{
		DNSPort:     FreePort(t),
		HealthAddr:  fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		ReadyAddr:   fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", FreePort(t)),
		Kubeconfig:  kubeconfig,
	}
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(v.expand(corefileTemplate)), 0o644); err != nil {
		t.Fatal(err)
	}
	var o CoreDNSOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	bin, args := Binary(t, "coredns-yurt"), []string{"-conf", path}
	if o.Executable != "" {
		link := filepath.Join(t.TempDir(), o.Executable)
		if err := os.Symlink(bin, link); err != nil {
			t.Fatal(err)
		}
		bin = link
	}
	if o.CPUs != "" {
		bin, args = "taskset", append([]string{"-c", o.CPUs, bin}, args...)
	}
	c := &CoreDNS{
		Process:    StartProcess(t, bin, args...),
		DNSAddr:    fmt.Sprintf("127.0.0.1:%d", v.DNSPort),
		HealthURL:  "http://" + v.HealthAddr + "/health",
		ReadyURL:   "http://" + v.ReadyAddr + "/ready",
		MetricsURL: "http://" + v.MetricsAddr + "/metrics",
		Corefile:   path,
	}
	c.WaitHTTP200(t, c.ReadyURL, o.ReadyTimeout)
	c.waitListening(t, o.ReadyTimeout)
	return c
}

// waitListening waits until the DNS sockets are open. CoreDNS (caddy) runs
// the plugins' startup hooks, where /ready starts reporting, before it opens
// the DNS sockets, so /ready can say 200 a moment early. A 1-byte datagram
// is dropped by the server without a reply, but draws "connection refused"
// while nothing listens; no query is sent, so no plugin (forward, say) is
// involved.
func (c *CoreDNS) waitListening(t TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := udpBound(c.DNSAddr)
		if err == nil {
			var conn net.Conn
			if conn, err = net.DialTimeout("tcp", c.DNSAddr, time.Second); err == nil {
				conn.Close()
				return
			}
		}
		if time.Now().After(deadline) || c.Exited() {
			t.Fatalf("coredns-yurt ready but not listening on %s: %v\n%s", c.DNSAddr, err, c.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func udpBound(addr string) error {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte{0}); err != nil {
		return err
	}
	_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = conn.Read(make([]byte, 512))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		return nil // a reply, or neither a reply nor a refusal: bound
	}
	return err
}
