package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

// StartCoreDNS writes the Corefile template with free loopback ports and the
// given kubeconfig, starts coredns-yurt on it and waits until /ready answers.
func StartCoreDNS(t testing.TB, kubeconfig, corefileTemplate string, extraArgs ...string) *CoreDNS {
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
	args := append([]string{"-conf", path}, extraArgs...)
	c := &CoreDNS{
		Process:    StartProcess(t, Binary(t, "coredns-yurt"), args...),
		DNSAddr:    fmt.Sprintf("127.0.0.1:%d", v.DNSPort),
		HealthURL:  "http://" + v.HealthAddr + "/health",
		ReadyURL:   "http://" + v.ReadyAddr + "/ready",
		MetricsURL: "http://" + v.MetricsAddr + "/metrics",
		Corefile:   path,
	}
	c.WaitHTTP200(t, c.ReadyURL, 30*time.Second)
	return c
}
