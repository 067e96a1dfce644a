package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBadFlagValuesMakeNoRequest: each bad flag value is refused at once,
// exit 1, with the valid values in the error, and without a single request
// to the apiserver (its audit log): a typo costs no wait.
func TestBadFlagValuesMakeNoRequest(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{AuditLog: true})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	bin := harness.Binary(t, "tunnel-nodes-sync") // built before the clock starts
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "--skip", "bogus"}, `--skip "bogus": no such step of --profile yurt-tunnel (its steps: records,rbac,`},
		{[]string{"install", "--profile", "raven", "--skip", "rbac"}, `--skip "rbac": no such step of --profile raven (its steps: records,raven-rbac,`},
		{[]string{"install", "--kcm-nodelifecycle", "bogus"}, `--kcm-nodelifecycle "bogus": must be one of auto, disable, keep`},
		{[]string{"install", "--timeout", "-1s"}, "--timeout -1s: must be 0 or more"},
		{[]string{"install", "--kubelet-servicemonitor", "kubelet"}, `ServiceMonitor "kubelet": want NAMESPACE/NAME`},
		{[]string{"revert", "--profile", "foo"}, `--profile "foo": must be one of yurt-tunnel, raven`},
		{[]string{"revert", "--timeout", "-1s"}, "--timeout -1s: must be 0 or more"},
		{[]string{"status", "--profile", "foo"}, `--profile "foo": must be one of yurt-tunnel, raven`},
		{[]string{"status", "--verify-dns", "foo"}, `--verify-dns "foo": want IP:PORT`},
		{[]string{"status", "-o", "table"}, `--output "table": must be json or yaml`},
		{[]string{"status", "--kcm-nodelifecycle", "bogus"}, "must be one of auto, disable, keep"},
		{[]string{"status", "--timeout", "-1s"}, "--timeout -1s: must be 0 or more"},
		{[]string{"check", "--profile", "foo"}, "must be one of yurt-tunnel, raven"},
		{[]string{"check", "-o", "table"}, `--output "table": must be json or yaml`},
		{[]string{"check", "--timeout", "-1s"}, "--timeout -1s: must be 0 or more"},
		{[]string{"version", "-o", "table"}, `--output "table": must be json or yaml`},
		{[]string{"patch-manifests", "--kcm-nodelifecycle", "bogus", "--manifests-dir", t.TempDir()}, "must be one of auto, disable, keep"},
	} {
		// A long --timeout: a call to the apiserver would not fail fast.
		args := append(slices.Clone(tc.args), "--kubeconfig", cp.Kubeconfig)
		if tc.args[0] != "patch-manifests" && !slices.Contains(tc.args, "--timeout") {
			args = append(args, "--timeout", "5m")
		}
		start := time.Now()
		p := harness.StartProcess(t, bin, args...)
		err := p.Wait(t, time.Minute)
		if code := exitCode(t, err); code != exitError || !strings.Contains(p.Output(), tc.want) || time.Since(start) > 10*time.Second {
			t.Errorf("%v: exit %d after %s, want 1 at once with %q:\n%s", tc.args, code, time.Since(start).Round(time.Millisecond), tc.want, p.Output())
		}
	}
	if requests := cp.AuditEvents(t, func(e harness.AuditEvent) bool { return strings.HasPrefix(e.UserAgent, "tunnel-nodes-sync") }); len(requests) > 0 {
		t.Errorf("bad flag values made %d request(s), e.g. %+v", len(requests), requests[0])
	}
}

// TestUnreachableAPIServer: status, check, install, revert and version
// against a port nothing listens on say at once where they wait (the URL,
// the context) and for how long, then fail with exit 1 and an error that
// points at --kubeconfig and --context, with no doubled prefix. With no
// kubeconfig at all, the error says so, not client-go's KUBERNETES_MASTER.
func TestUnreachableAPIServer(t *testing.T) {
	t.Parallel()
	server := fmt.Sprintf("https://127.0.0.1:%d", harness.FreePort(t))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "`+server+`"}}]
contexts: [{name: gone-admin, context: {cluster: gone, user: admin}}]
current-context: gone-admin
users: [{name: admin, user: {token: secret}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := harness.Binary(t, "tunnel-nodes-sync")
	commands := []string{"status", "check", "install", "revert", "version"}
	started := map[string]*harness.Process{}
	start := time.Now()
	for _, cmd := range commands {
		started[cmd] = harness.StartProcess(t, bin, cmd, "--kubeconfig", kubeconfig, "--timeout", "10s")
	}
	// At once: while each still waits, it has said where and for how long.
	want := fmt.Sprintf(`The apiserver at %s (context "gone-admin", kubeconfig %s) does not answer (`, server, kubeconfig)
	for _, cmd := range commands {
		p := started[cmd]
		harness.Eventually(t, 8*time.Second, func() error {
			if out := p.Output(); !strings.Contains(out, want) || !strings.Contains(out, "waiting up to 10s (--timeout) for it") {
				return fmt.Errorf("%s: no line saying where it waits, and how long:\n%s", cmd, out)
			}
			return nil
		})
		if p.Exited() {
			t.Errorf("%s: said it waits only as it exited:\n%s", cmd, p.Output())
		}
	}
	for _, cmd := range commands {
		p := started[cmd]
		err := p.Wait(t, time.Minute)
		out := p.Output()
		if code := exitCode(t, err); code != exitError || !strings.Contains(out, "did not answer within 10s (--timeout)") ||
			!strings.Contains(out, "check --kubeconfig and --context") || time.Since(start) > 30*time.Second {
			t.Errorf("%s: exit %d after %s, want 1 after 10s naming --kubeconfig and --context:\n%s", cmd, code, time.Since(start).Round(time.Millisecond), out)
		}
		if strings.Contains(out, "reading install state: reading install state") {
			t.Errorf("%s: doubled prefix:\n%s", cmd, out)
		}
	}

	// No kubeconfig at all: no --kubeconfig, no $KUBECONFIG, no ~/.kube/config, not in a pod.
	for _, cmd := range []string{"status", "install"} {
		c := exec.Command(bin, cmd)
		c.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		out, err := c.CombinedOutput()
		if code := exitCode(t, err); code != exitError || !strings.Contains(string(out), "no kubeconfig") ||
			!strings.Contains(string(out), "give --kubeconfig") || strings.Contains(string(out), "KUBERNETES_MASTER") {
			t.Errorf("%s without a kubeconfig: exit %d\n%s", cmd, code, out)
		}
	}
}

// TestBareInstallSkipsControlPlane: install without --control-plane-jobs
// or --manifests-dir records the control-plane step as skipped (not
// applied), and status exits 0 and says how to apply it, blaming no one.
func TestBareInstallSkipsControlPlane(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	// Every step that needs more of a cluster than envtest has is skipped, the control-plane step not.
	bare := strings.ReplaceAll(recordsOnly, ",control-plane", "")
	out, err := runSync(t, cp, "install", bare)
	if err != nil || !strings.Contains(out, "[control-plane] skipped: neither --manifests-dir nor --control-plane-jobs given: install --control-plane-jobs") {
		t.Fatalf("bare install: %v\n%s", err, out)
	}
	r, code, out := statusJSON(t, cp.Kubeconfig)
	i := slices.IndexFunc(r.Steps, func(s engine.StatusReport) bool { return s.Step == "control-plane" })
	if code != exitApplied || i < 0 || r.Steps[i].Status != engine.Skipped || r.Steps[i].Recorded ||
		!strings.Contains(r.Steps[i].Detail, "to apply it: install --control-plane-jobs") {
		t.Errorf("status after a bare install: exit %d, %+v\n%s", code, r, out)
	}
	out, err = runSync(t, cp, "status")
	if exitCode(t, err) != exitApplied || !strings.Contains(out, "control-plane      skipped (the last install skipped it; to apply it: install --control-plane-jobs") ||
		strings.Contains(out, "drifted") || strings.Contains(out, "kubeadm") {
		t.Errorf("text status after a bare install: %v\n%s", err, out)
	}
}

// TestEveryStepSkippable: install --skip with every step of a profile
// records each as skipped; status lists each as skipped with the way to
// apply it, and exits 3 (nothing installed); revert leaves no state.
func TestEveryStepSkippable(t *testing.T) {
	t.Parallel()
	for _, profile := range layout.Names() {
		t.Run(profile, func(t *testing.T) {
			t.Parallel()
			var cp *harness.ControlPlane
			if profile == layout.Raven {
				cp = newRavenCluster(t)
			} else {
				cp = harness.Start(t, harness.Options{})
				cp.CreateService(t, harness.TunnelService("10.96.0.9"))
			}
			steps := layoutSteps(profile)
			out, err := runSync(t, cp, "install", "--profile", profile, "--skip", strings.Join(steps, ","))
			if err != nil {
				t.Fatalf("install --skip every step: %v\n%s", err, out)
			}
			r, code, out := statusJSON(t, cp.Kubeconfig)
			if code != exitNotInstalled {
				t.Errorf("status: exit %d, want %d (nothing installed)\n%s", code, exitNotInstalled, out)
			}
			for _, name := range steps {
				i := slices.IndexFunc(r.Steps, func(s engine.StatusReport) bool { return s.Step == name })
				if i < 0 || r.Steps[i].Status != engine.Skipped || r.Steps[i].Recorded || !strings.HasSuffix(r.Steps[i].Detail, "install without --skip "+name) {
					t.Errorf("step %s: %+v, want skipped with how to apply it\n%s", name, r.Steps, out)
				}
			}
			if out, err := runSync(t, cp, "revert"); err != nil {
				t.Fatalf("revert: %v\n%s", err, out)
			}
			if _, err := cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(context.Background(), engine.StateConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("install state after revert: %v, want none", err)
			}
		})
	}
}

// TestVersionCommand: version prints this binary's version and commit and
// what the cluster's install state records, as text and with -o json.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	cp.CreateService(t, harness.TunnelService("10.96.0.9"))
	type report struct {
		Version, Commit string
		Cluster         *struct {
			Installed        bool
			Version, Profile string
		}
	}
	versionJSON := func() report {
		t.Helper()
		out, err := exec.Command(harness.Binary(t, "tunnel-nodes-sync"), "version", "-o", "json", "--kubeconfig", cp.Kubeconfig).Output()
		var r report
		if err != nil || json.Unmarshal(out, &r) != nil || r.Version == "" || r.Commit == "" || r.Cluster == nil {
			t.Fatalf("version -o json: %v\n%s", err, out)
		}
		return r
	}
	if r := versionJSON(); r.Cluster.Installed {
		t.Errorf("before install: %+v, want not installed", r.Cluster)
	}
	if out, err := runSync(t, cp, "version"); err != nil || !strings.Contains(out, "tunnel-nodes-sync dev (commit ") || !strings.Contains(out, "Installed: not installed") {
		t.Errorf("version before install: %v\n%s", err, out)
	}
	if out, err := runSync(t, cp, "install", recordsOnly); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	// The harness builds without the Makefile's -ldflags: version "dev".
	if r := versionJSON(); !r.Cluster.Installed || r.Cluster.Version != "dev" || r.Cluster.Profile != layout.YurtTunnel {
		t.Errorf("after install: %+v", r.Cluster)
	}
	if out, err := runSync(t, cp, "version"); err != nil || !strings.Contains(out, "Installed: dev, profile yurt-tunnel") {
		t.Errorf("version after install: %v\n%s", err, out)
	}
}
