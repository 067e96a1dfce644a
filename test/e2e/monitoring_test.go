package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/test/harness"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// TestInstallMonitoring: the monitoring step against prometheus-operator's
// CRDs. Without them it is skipped and says why; with the PodMonitor CRD
// alone it creates the PodMonitors and says the PrometheusRule is left
// out; once that CRD is there too, the next install adds the rule; status
// says applied; revert deletes all four.
func TestInstallMonitoring(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	ctx := context.Background()
	skip := "--skip=" + strings.Join(slices.DeleteFunc(layoutSteps(layout.YurtTunnel), func(s string) bool { return s == "monitoring" }), ",")
	run := func(args ...string) string {
		t.Helper()
		return mustRunSync(t, cp.Kubeconfig, args...)
	}
	// status's exit code tells installed from not (docs/cli.md); this
	// test reads the step's line.
	statusLine := func() string {
		t.Helper()
		p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), "status", "--kubeconfig", cp.Kubeconfig, "--timeout", "20s")
		_ = p.Wait(t, time.Minute)
		for line := range strings.Lines(p.Output()) {
			if strings.HasPrefix(strings.TrimSpace(line), "monitoring ") {
				return strings.TrimSpace(line)
			}
		}
		t.Fatal("status has no monitoring line")
		return ""
	}
	const noCRDs = "no PodMonitor or PrometheusRule CRD (monitoring.coreos.com/v1): prometheus-operator is not installed"
	if out := run("install", skip); !strings.Contains(out, "[monitoring] skipped: "+noCRDs) {
		t.Errorf("install without the CRDs:\n%s", out)
	}
	if line := statusLine(); !strings.Contains(line, "not applied") || !strings.Contains(line, "skipped by install: "+noCRDs) {
		t.Errorf("status without the CRDs: %q", line)
	}

	dyn := dynamic.NewForConfigOrDie(cp.Config)
	resource := func(plural string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: plural}).Namespace("kube-system")
	}
	crd := func(plural string) {
		t.Helper()
		cp.CreateFromFile(t, prometheusFixtures+strings.TrimSuffix(plural, "s")+"-crd.yaml")
		harness.Eventually(t, 10*time.Second, func() error {
			_, err := resource(plural).List(ctx, metav1.ListOptions{})
			return err
		})
	}
	names := func(plural string) []string {
		t.Helper()
		list, err := resource(plural).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range list.Items {
			if o.GetLabels()[engine.ManagedByLabel] != "yurtdns" {
				t.Errorf("%s %s is not labelled %s=yurtdns", plural, o.GetName(), engine.ManagedByLabel)
			}
			names = append(names, o.GetName())
		}
		slices.Sort(names)
		return names
	}
	podMonitors := []string{"coredns-yurt", "node-local-dns", "tunnel-nodes-sync"}

	crd("podmonitors")
	out := run("install", skip)
	if !strings.Contains(out, "[monitoring] created PodMonitor kube-system/tunnel-nodes-sync, PodMonitor kube-system/coredns-yurt, PodMonitor kube-system/node-local-dns") ||
		!strings.Contains(out, "(no PrometheusRule CRD (monitoring.coreos.com/v1): prometheus-operator is not installed)") {
		t.Errorf("install with the PodMonitor CRD only:\n%s", out)
	}
	if got := names("podmonitors"); !slices.Equal(got, podMonitors) {
		t.Errorf("PodMonitors %v, want %v", got, podMonitors)
	}

	crd("prometheusrules")
	if out := run("install", skip); !strings.Contains(out, "[monitoring] created PrometheusRule kube-system/yurtdns") {
		t.Errorf("install with both CRDs:\n%s", out)
	}
	if got := names("prometheusrules"); !slices.Equal(got, []string{"yurtdns"}) {
		t.Errorf("PrometheusRules %v, want yurtdns", got)
	}
	if out := run("install", skip); !strings.Contains(out, "[monitoring] already applied") {
		t.Errorf("second install:\n%s", out)
	}
	if line := statusLine(); !strings.Contains(line, "applied") || strings.Contains(line, "not applied") {
		t.Errorf("status after install: %q", line)
	}

	out = run("revert")
	if !strings.Contains(out, "[monitoring] deleted PrometheusRule kube-system/yurtdns") || !strings.Contains(out, "PodMonitor kube-system/tunnel-nodes-sync") {
		t.Errorf("revert:\n%s", out)
	}
	for _, plural := range []string{"podmonitors", "prometheusrules"} {
		harness.Eventually(t, 10*time.Second, func() error {
			if got := names(plural); len(got) > 0 {
				return fmt.Errorf("%s left: %v", plural, got)
			}
			return nil
		})
	}
	if line := statusLine(); !strings.Contains(line, "not applied") {
		t.Errorf("status after revert: %q", line)
	}
}
