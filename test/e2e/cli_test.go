package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The status exit codes docs/cli.md and `status --help` document.
const (
	exitApplied      = 0
	exitError        = 1
	exitDrifted      = 2
	exitNotInstalled = 3
)

// exitCode is how a process's Wait ended, as its exit status.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatalf("not an exit status: %v", err)
	return -1
}

// statusJSON runs status -o json against kubeconfig, with args, and returns
// the report, the exit code and the whole output.
func statusJSON(t *testing.T, kubeconfig string, args ...string) (install.Report, int, string) {
	t.Helper()
	cmd := exec.Command(harness.Binary(t, "tunnel-nodes-sync"), append([]string{"status", "-o", "json", "--kubeconfig", kubeconfig, "--timeout", "20s"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	code := exitCode(t, err)
	out := string(stdout) + stderr.String()
	var r install.Report
	if code != exitError {
		// stdout holds the document alone.
		if err := json.Unmarshal(stdout, &r); err != nil {
			t.Fatalf("status -o json (exit %d): stdout is not the report: %v\n%s", code, err, out)
		}
	}
	return r, code, out
}

// TestBareCommandPrintsHelp: tunnel-nodes-sync without a subcommand, with a
// kubeconfig at hand ($KUBECONFIG, an admin's), prints its help and exits
// 0 without a request to the apiserver: no leader election, no write.
// run's flags without `run` are refused, the same way.
func TestBareCommandPrintsHelp(t *testing.T) {
	cp := harness.Start(t, harness.Options{AuditLog: true})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	cp.CreateNode(t, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	bin := harness.Binary(t, "tunnel-nodes-sync")
	t.Setenv("KUBECONFIG", cp.Kubeconfig)

	p := harness.StartProcess(t, bin)
	err := p.Wait(t, 10*time.Second)
	out := p.Output()
	if code := exitCode(t, err); code != 0 || !strings.Contains(out, "Usage:\n  tunnel-nodes-sync [command]") || !strings.Contains(out, "Available Commands:") {
		t.Errorf("bare tunnel-nodes-sync: exit %d, want 0 and the help:\n%s", code, out)
	}
	for _, internal := range []string{"node-local-dns", "verify-node-dns"} {
		if strings.Contains(out, "\n  "+internal+" ") {
			t.Errorf("the help lists the internal %s:\n%s", internal, out)
		}
	}
	if !strings.Contains(out, "\n  completion ") || !strings.Contains(out, "\n  run ") {
		t.Errorf("the help lacks completion or run:\n%s", out)
	}

	p = harness.StartProcess(t, bin, "--leader-elect=false")
	if err := p.Wait(t, 10*time.Second); exitCode(t, err) != 1 || !strings.Contains(p.Output(), "unknown flag: --leader-elect") {
		t.Errorf("run's flag without run: %v\n%s", err, p.Output())
	}

	ctx := context.Background()
	if _, err := cp.Client.CoordinationV1().Leases(tunnelnodes.Namespace).Get(ctx, tunnelnodes.LeaderElectionID, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("leader election Lease: %v, want none", err)
	}
	if _, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, tunnelnodes.ConfigMapName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("records ConfigMap: %v, want none", err)
	}
	if requests := cp.AuditEvents(t, func(e harness.AuditEvent) bool { return strings.HasPrefix(e.UserAgent, "tunnel-nodes-sync") }); len(requests) > 0 {
		t.Errorf("the bare command made %d request(s), e.g. %+v", len(requests), requests[0])
	}
}

// recordsOnly skips every yurt-tunnel step but records: an install in
// seconds on a bare control plane.
const recordsOnly = "--skip=rbac,corefile,coredns-daemonset,kube-dns-topology,kube-proxy,control-plane,tunnel-dns,sync,prometheus"

// TestStatusOutputAndExitCodes: status -o json (and yaml) is the
// documented report, and the exit code tells apart not installed (3),
// applied (0), drifted (2) and an error (1), in text as in json.
func TestStatusOutputAndExitCodes(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	ctx := context.Background()

	r, code, out := statusJSON(t, cp.Kubeconfig)
	if code != exitNotInstalled || r.Result != install.ResultNotInstalled || r.Profile != layout.YurtTunnel || len(r.Steps) != len(layoutSteps(layout.YurtTunnel))+1 ||
		slices.ContainsFunc(r.Steps, func(s engine.StatusReport) bool { return s.Recorded }) || !strings.Contains(out, "not installed: the install state records no step as applied") {
		t.Errorf("before install: exit %d, %+v\n%s", code, r, out)
	}
	if out, err := runSync(t, cp, "status"); exitCode(t, err) != exitNotInstalled || !strings.Contains(out, "records            not applied\n") {
		t.Errorf("text status before install: %v\n%s", err, out)
	}

	if out, err := runSync(t, cp, "install", recordsOnly); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	r, code, out = statusJSON(t, cp.Kubeconfig)
	records := r.Steps[slices.IndexFunc(r.Steps, func(s engine.StatusReport) bool { return s.Step == "records" })]
	if code != exitApplied || r.Result != install.ResultApplied || records.Status != engine.Applied || !records.Recorded || r.NodeNamesWrong != nil {
		t.Errorf("installed: exit %d, %+v\n%s", code, r, out)
	}
	// The documented field names, in yaml as in json.
	p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), "status", "-o", "yaml", "--kubeconfig", cp.Kubeconfig)
	if err := p.Wait(t, time.Minute); err != nil {
		t.Fatalf("status -o yaml: %v\n%s", err, p.Output())
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(p.Output()), &doc); err != nil || doc["profile"] != layout.YurtTunnel || doc["result"] != "applied" {
		t.Errorf("status -o yaml (%v): %v\n%s", err, doc, p.Output())
	}
	if step := doc["steps"].([]any)[0].(map[string]any); step["name"] != "records" || step["state"] != "applied" || step["recorded"] != true {
		t.Errorf("status -o yaml: first step %v", step)
	}

	// An object install created, gone: drifted.
	if err := cp.Client.RbacV1().Roles(tunnelnodes.ShardsNamespace).Delete(ctx, "yurtdns:records-reader", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r, code, out = statusJSON(t, cp.Kubeconfig)
	if code != exitDrifted || r.Result != install.ResultDrifted || !strings.Contains(out, "1 step(s) drifted") {
		t.Errorf("drifted: exit %d, %+v\n%s", code, r, out)
	}
	if out, err := runSync(t, cp, "status"); exitCode(t, err) != exitDrifted || !strings.Contains(out, "records            drifted (") {
		t.Errorf("text status drifted: %v\n%s", err, out)
	}

	// status cannot tell: an error, and no report on stdout.
	if _, code, out := statusJSON(t, cp.Kubeconfig, "--output", "table"); code != exitError || !strings.Contains(out, `--output "table": must be json or yaml`) {
		t.Errorf("a bad -o: exit %d\n%s", code, out)
	}
	kubeconfig, proxy := cp.ProxiedKubeconfig(t, cp.Kubeconfig)
	proxy.Cut()
	if _, code, out := statusJSON(t, kubeconfig, "--timeout", "2s"); code != exitError || !strings.Contains(out, "did not answer within 2s") {
		t.Errorf("the apiserver unreachable: exit %d\n%s", code, out)
	}
}

// TestProfileFromInstallState: after install --profile raven, status and
// revert take the profile from the install state; --profile yurt-tunnel
// is refused, naming the recorded one, and changes nothing.
func TestProfileFromInstallState(t *testing.T) {
	t.Parallel()
	cp := newRavenCluster(t)
	if out, err := runSync(t, cp, "install", "--profile", "raven", "--skip=raven-rbac,raven-corefile,raven-proxy-dns,gateway-dns,raven-sync"); err != nil {
		t.Fatalf("install --profile raven: %v\n%s", err, out)
	}
	r, code, out := statusJSON(t, cp.Kubeconfig)
	if code != exitApplied || r.Profile != layout.Raven || r.Steps[1].Step != "raven-rbac" {
		t.Errorf("status without --profile: exit %d, %+v\n%s", code, r, out)
	}
	for _, cmd := range []string{"status", "revert", "install"} {
		out, err := runSync(t, cp, cmd, "--profile", "yurt-tunnel")
		if exitCode(t, err) != exitError || !strings.Contains(out, "--profile yurt-tunnel: the install state (ConfigMap kube-system/yurtdns-install-state) records --profile raven") {
			t.Errorf("%s --profile yurt-tunnel: %v\n%s", cmd, err, out)
		}
	}
	if out, err := runSync(t, cp, "revert"); err != nil || !strings.Contains(out, "[raven-sync] not applied: nothing to revert") || !strings.Contains(out, "[records] deleted") {
		t.Errorf("revert without --profile: %v\n%s", err, out)
	}
	// Reverted: no state, so --profile (else the default) again.
	if r, code, out := statusJSON(t, cp.Kubeconfig); code != exitNotInstalled || r.Profile != layout.YurtTunnel {
		t.Errorf("status after revert: exit %d, %+v\n%s", code, r, out)
	}
}

// TestFirstCallWaitsOutTheAPIServer: install, status and revert started
// while the apiserver is unreachable (as after a killed install restarted
// it) wait for it, saying so on stderr (where, and for how long), from
// their first call on.
func TestFirstCallWaitsOutTheAPIServer(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	kubeconfig, proxy := cp.ProxiedKubeconfig(t, cp.Kubeconfig)
	for _, args := range [][]string{{"install", recordsOnly}, {"status"}, {"revert"}} {
		proxy.Cut()
		p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), append([]string{args[0], "--kubeconfig", kubeconfig, "--timeout", "1m"}, args[1:]...)...)
		harness.Eventually(t, 20*time.Second, func() error {
			if out := p.Output(); !strings.Contains(out, "does not answer (") || !strings.Contains(out, "waiting up to 1m0s (--timeout) for it") || !strings.Contains(out, "connection refused") {
				return errors.New("not waiting yet:\n" + out)
			}
			return nil
		})
		if p.Exited() {
			t.Fatalf("%s exited while the apiserver was away:\n%s", args[0], p.Output())
		}
		proxy.Restore(t)
		if err := p.Wait(t, time.Minute); err != nil {
			t.Errorf("%s once the apiserver was back: %v\n%s", args[0], err, p.Output())
		}
	}
}
