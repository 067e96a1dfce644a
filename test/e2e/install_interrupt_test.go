package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// installFlags are the flags of every install in this file.
var installFlags = []string{"install", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test"}

// Where an install or a revert is killed.
const (
	// afterStep: right after the state update that marks the step applied
	// (revert: that deletes the step's entry), before the next step has read
	// or written anything.
	afterStep = "after-step"
	// midStep: the step's write-ahead record is saved (revert: every later
	// step's entry is deleted) and the step's first write has reached the
	// apiserver (for control-plane: the manifest files are written), and
	// nothing after it has: the process dies waiting for that write's answer.
	midStep = "mid-step"
)

// TestInstallInterrupted kills `install` (SIGKILL) in each step in turn —
// right after the step completed, or in the middle of it, between its
// write-ahead record and the rest of its writes (interruptPoints; make soak
// kills at both) — then runs install again: it must complete, status must
// report every step applied, and the cluster (objects, created objects,
// manifest files and the install state itself) must equal what an
// uninterrupted install produces. Revert must then restore every original
// and remove the state.
//
// Then the same for `revert` (subtests revert/<step>/<point>): after an
// uninterrupted install, revert is killed right after it deleted a step's
// state entry, or in the middle of the step, once the step's first
// restoring write reached the apiserver (for control-plane: the manifest
// files are restored) and before its entry is deleted. Revert run again must
// leave the originals, no object install created and no state, and
// kube-proxy must have been restarted exactly once, after its config was
// restored. Install run right after a killed revert must converge like an
// uninterrupted install, and revert it again.
//
// The kill points are exact, not raced: the killed command reaches the
// apiserver through a proxy in this test, which sends SIGKILL while the
// process is blocked on the request that marks the point (a watch on the
// state ConfigMap would see the update milliseconds later, by which time the
// process has made its next few writes).
//
// Control planes are reused: each case starts from the originals the
// previous revert restored (so revert→install cycles are tested too). The
// steps run on three control planes side by side (make test runs the e2e
// tests three at a time), because an install spends most of its time in its
// client's rate limiter; a step whose case failed hands its control plane
// back as unusable and the next step starts afresh.
func TestInstallInterrupted(t *testing.T) {
	t.Parallel()
	const lanes = 3
	type tally struct{ cases, after, mid, converged, restored, restarted, lost int }
	var mu sync.Mutex
	const installAfterRevert = "install after revert"
	tallies := map[string]*tally{"install": {}, "revert": {}, installAfterRevert: {}}
	// count counts a case of cmd killed at point, also when it stopped early.
	count := func(cmd, point string, res *interruptResult) {
		mu.Lock()
		defer mu.Unlock()
		n := tallies[cmd]
		n.cases++
		if point == afterStep {
			n.after++
		} else {
			n.mid++
		}
		n.lost += res.lost
		if res.converged {
			n.converged++
		}
		if res.restored {
			n.restored++
		}
		if res.restarted {
			n.restarted++
		}
	}
	t.Cleanup(func() {
		i, r, ir := tallies["install"], tallies["revert"], tallies[installAfterRevert]
		t.Logf("%d interruptions: %d after-step, %d mid-step; reruns converged %d/%d; reverts restored originals %d/%d; %d values lost",
			i.cases, i.after, i.mid, i.converged, i.cases, i.restored, i.cases, i.lost)
		t.Logf("%d revert interruptions: %d after-step, %d mid-step; reruns restored originals %d/%d; "+
			"kube-proxy restarted once, after its config was restored, %d/%d; %d values lost",
			r.cases, r.after, r.mid, r.restored, r.cases, r.restarted, r.cases, r.lost)
		t.Logf("%d installs right after a killed revert: converged %d/%d; reverts restored originals %d/%d; %d values lost",
			ir.cases, ir.converged, ir.cases, ir.restored, ir.cases, ir.lost)
	})
	pool := make(chan *interruptCluster, lanes)
	for range lanes {
		pool <- newInterruptCluster(t)
	}
	// lane runs the cases of one subtest on a control plane from the pool,
	// or on a fresh one owned by the subtest when a failed case left the
	// pool's in an unknown state (nil).
	lane := func(t *testing.T, cases func(run func(name string, f func(*testing.T, *interruptCluster)))) {
		t.Parallel()
		c, owned := <-pool, false
		defer func() {
			if owned {
				c = nil // it stops with this subtest
			}
			pool <- c
		}()
		cases(func(name string, f func(*testing.T, *interruptCluster)) {
			if c == nil {
				c, owned = newInterruptCluster(t), true
			}
			if !t.Run(name, func(t *testing.T) { f(t, c) }) {
				c = nil
			}
		})
	}
	// Every step with a write to kill at: prometheus and monitoring make none on this
	// cluster (no prometheus-operator), so it is not killed here.
	steps := slices.DeleteFunc(layoutSteps(layout.YurtTunnel), func(s string) bool { return s == "prometheus" || s == "monitoring" })
	// stepCases kills cmd at each step in turn, at the points interruptPoints
	// gives: subtests <step>/<point> of t.
	stepCases := func(t *testing.T, cmd string) {
		for i, step := range steps {
			t.Run(step, func(t *testing.T) {
				lane(t, func(run func(string, func(*testing.T, *interruptCluster))) {
					for _, point := range interruptPoints(cmd, i) {
						run(point, func(t *testing.T, c *interruptCluster) {
							var res interruptResult
							defer count(cmd, point, &res)
							if cmd == "install" {
								c.interrupt(t, i, point, &res)
							} else {
								c.interruptRevert(t, i, point, &res)
							}
						})
					}
				})
			})
		}
	}
	stepCases(t, "install")

	// Revert straight after a kill, without installing again, undoes the
	// steps install completed and the part of the step it was killed in.
	t.Run("revert-after-kill", func(t *testing.T) {
		lane(t, func(run func(string, func(*testing.T, *interruptCluster))) {
			run("kube-proxy", func(t *testing.T, c *interruptCluster) {
				c.kill(t, "install", slices.Index(steps, "kube-proxy"), midStep, nil)
				if restored, lost := c.revert(t, c.Kubeconfig); !restored || lost > 0 {
					t.Errorf("revert straight after the kill: %d values not restored", lost)
				}
			})
		})
	})

	t.Run("revert", func(t *testing.T) {
		t.Parallel()
		stepCases(t, "revert")
	})

	// Install straight after a killed revert, without reverting again,
	// converges as an uninterrupted install does, and revert then restores
	// the originals: killed in the middle of kube-proxy (its config restored,
	// kube-proxy not yet restarted), and after the last step (only the empty
	// state left).
	t.Run("install-after-revert-kill", func(t *testing.T) {
		for _, at := range []struct{ step, point string }{{"kube-proxy", midStep}, {"rbac", afterStep}} {
			t.Run(at.step, func(t *testing.T) {
				lane(t, func(run func(string, func(*testing.T, *interruptCluster))) {
					run(at.point, func(t *testing.T, c *interruptCluster) {
						var res interruptResult
						defer count(installAfterRevert, at.point, &res)
						c.install(t)
						c.kill(t, "revert", slices.Index(steps, at.step), at.point, nil)
						c.rerunInstall(t, c.kubeProxy(t).Generation, &res)
						restored, lost := c.revert(t, c.Kubeconfig)
						res.restored, res.lost = restored, res.lost+lost
					})
				})
			})
		}
	})
}

// everyPointEnv, set (make soak sets it), has TestInstallInterrupted kill
// install and revert at both points of every step.
const everyPointEnv = "YURTDNS_INTERRUPT_EVERY_POINT"

// interruptPoints are where the i-th step of cmd is killed: both points
// with everyPointEnv; else one, alternating from step to step and the other
// way round for revert, so that make test kills every step of each command
// once and each step at both points across the two commands (a case costs
// an install and a revert, about 10 s of the machine's two cores).
func interruptPoints(cmd string, i int) []string {
	if os.Getenv(everyPointEnv) != "" {
		return []string{afterStep, midStep}
	}
	if (i%2 == 0) == (cmd == "install") {
		return []string{midStep}
	}
	return []string{afterStep}
}

// interruptCluster is a kubeadm cluster with what an uninterrupted install
// makes of it, to compare interrupted ones against.
type interruptCluster struct {
	*kubeadmCluster
	original  map[string]string // snapshot before install (and after each revert)
	installed map[string]string // snapshot after an uninterrupted install
	created   map[string]string // objects an uninterrupted install created
	state     map[string]string // the install state it recorded
	// stopControllers stops the stand-in rollout controllers.
	stopControllers func()
}

func newInterruptCluster(t *testing.T) *interruptCluster {
	k := newKubeadmCluster(t)
	c := &interruptCluster{kubeadmCluster: k, original: k.snapshot(t), stopControllers: k.PlayRolloutControllers(tunnelnodes.Namespace)}
	t.Cleanup(func() { c.stopControllers() })
	if out, err := k.run(t, installFlags...); err != nil {
		t.Fatalf("uninterrupted install: %v\n%s", err, out)
	}
	c.installed, c.created, c.state = k.snapshot(t), k.createdObjects(t), k.installState(t)
	// Every step records its state but prometheus and monitoring, skipped here (no prometheus-operator).
	if len(c.created) == 0 || len(c.state) != len(layoutSteps(layout.YurtTunnel))-2 {
		t.Fatalf("uninterrupted install created %d objects and recorded %d steps", len(c.created), len(c.state))
	}
	if out, err := k.run(t, "revert"); err != nil {
		t.Fatalf("revert of the uninterrupted install: %v\n%s", err, out)
	}
	if changed := diffSnapshots(c.original, k.snapshot(t)); len(changed) > 0 {
		t.Fatalf("revert of the uninterrupted install left %v changed", changed)
	}
	return c
}

// pauseControllers stops the stand-in rollout controllers until resume is
// called: what is scaled up meanwhile does not become available.
func (c *interruptCluster) pauseControllers() (resume func()) {
	c.stopControllers()
	return func() { c.stopControllers = c.PlayRolloutControllers(tunnelnodes.Namespace) }
}

type interruptResult struct {
	converged, restored bool
	// restarted: kube-proxy was restarted exactly once, after its config was restored.
	restarted bool
	lost      int // original values not restored, or recorded wrong
}

// interrupt kills install at point of step steps[i], runs it again and
// checks the outcome against an uninterrupted install, reverts, and checks
// the originals are back; res says how it went so far.
func (c *interruptCluster) interrupt(t *testing.T, i int, point string, res *interruptResult) {
	step := layoutSteps(layout.YurtTunnel)[i]
	gen0 := c.kubeProxy(t).Generation
	c.kill(t, "install", i, point, nil)
	if point == midStep {
		// Revert would undo the part of the step done so far too.
		if out, err := c.run(t, "revert", "--dry-run"); err != nil || !strings.Contains(out, "["+step+"] would: ") {
			t.Errorf("revert --dry-run after a kill in the middle of %s does not undo it: %v\n%s", step, err, out)
		}
	}
	c.rerunInstall(t, gen0, res)
	restored, lost := c.revert(t, c.Kubeconfig)
	res.restored, res.lost = restored, res.lost+lost
}

// rerunInstall runs install after a kill and checks the cluster is as an
// uninterrupted install leaves it, and kube-proxy was restarted since its
// DaemonSet had generation gen0.
func (c *interruptCluster) rerunInstall(t *testing.T, gen0 int64, res *interruptResult) {
	t.Helper()
	out, err := c.run(t, installFlags...)
	if err != nil {
		t.Fatalf("install after the kill: %v\n%s", err, out)
	}
	t.Logf("install after the kill:\n%s", out)
	res.converged = true
	if out, err := c.run(t, "status"); err != nil || !allApplied(out) {
		res.converged = false
		t.Errorf("status after the rerun: %v\n%s", err, out)
	}
	now := c.snapshot(t)
	for _, changed := range diffSnapshots(c.installed, now) {
		res.converged = false
		t.Errorf("after the rerun %s differs from an uninterrupted install:\n%s\nwant:\n%s", changed, now[changed], c.installed[changed])
	}
	created := c.createdObjects(t)
	for _, name := range unionKeys(c.created, created) {
		if created[name] != c.created[name] {
			res.converged = false
			t.Errorf("after the rerun %s differs from an uninterrupted install:\n%s\nwant:\n%s", name, created[name], c.created[name])
		}
	}
	// The state holds the same originals and the same record of every step:
	// a value recorded wrong here would be restored wrong by revert.
	recorded := c.installState(t)
	for _, name := range unionKeys(c.state, recorded) {
		if recorded[name] != c.state[name] {
			res.converged = false
			res.lost++
			t.Errorf("after the rerun the install state of %s is\n%s\nwant (uninterrupted install):\n%s", name, recorded[name], c.state[name])
		}
	}
	// kube-proxy reads its config only at start: it must have been
	// restarted after the config was written.
	if gen := c.kubeProxy(t).Generation; gen <= gen0 {
		res.converged = false
		t.Errorf("kube-proxy was not restarted after its config changed (DaemonSet generation %d before, %d after)", gen0, gen)
	}
}

// interruptRevert installs, kills revert at point of step steps[i], runs
// revert again and checks the originals are back, and kube-proxy was
// restarted exactly once, after its config was restored; res says how it
// went so far.
func (c *interruptCluster) interruptRevert(t *testing.T, i int, point string, res *interruptResult) {
	ctx := context.Background()
	step := layoutSteps(layout.YurtTunnel)[i]
	c.install(t)
	// In the middle of coredns-daemonset the kill comes right after the
	// Deployment was scaled back, before its pods are up (the stand-in
	// controllers pause as the step begins; kube-proxy's restart before it
	// needs them): revert run again must wait for them before the
	// DaemonSet goes, and keep the DaemonSet when they do not come up.
	// (A failed case leaves the controllers paused: its cluster is not reused.)
	keepsDNS := step == "coredns-daemonset" && point == midStep
	resume := func() {}
	var onArm func()
	if keepsDNS {
		onArm = func() { resume = c.pauseControllers() }
	}
	gen0 := c.kubeProxy(t).Generation
	killed := c.kill(t, "revert", i, point, onArm)
	if keepsDNS {
		out, err := c.run(t, "revert", "--timeout", "1s")
		if err == nil || !strings.Contains(out, "Deployment coredns not available after 1s") {
			t.Errorf("revert after a kill in the middle of %s, the Deployment's pods not up: want it to wait for them and fail, got %v\n%s", step, err, out)
		}
		if _, err := c.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, "coredns", metav1.GetOptions{}); err != nil {
			t.Errorf("revert deleted the coredns DaemonSet before the Deployment was available: %v", err)
		}
		resume()
	}

	// Revert again, through a proxy that only records the writes.
	rerun := newKillProxy(t, c.ControlPlane, "revert", "", "", nil)
	restored, lost := c.revert(t, rerun.Kubeconfig)
	res.restored, res.lost = restored, lost

	// kube-proxy reads its config only at start: one restart, after the
	// config was restored (the restart patches the DaemonSet's template).
	var restores, restarts []int
	writes := slices.Concat(killed.Written(), rerun.Written())
	for n, w := range writes {
		switch w {
		case "PUT /api/v1/namespaces/kube-system/configmaps/kube-proxy":
			restores = append(restores, n)
		case "PATCH /apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy":
			restarts = append(restarts, n)
		}
	}
	gen := c.kubeProxy(t).Generation
	res.restarted = len(restores) == 1 && len(restarts) == 1 && restarts[0] > restores[0] && gen == gen0+1
	if !res.restarted {
		t.Errorf("kube-proxy: config restored by write %v, restarted by write %v of the killed revert and the rerun, DaemonSet generation %d before, %d after; "+
			"want one restart after the one restoring write\nkilled revert and rerun wrote %q", restores, restarts, gen0, gen, writes)
	}
}

// install runs an uninterrupted install and checks it made what the first did.
func (c *interruptCluster) install(t *testing.T) {
	t.Helper()
	if out, err := c.run(t, installFlags...); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	now := c.snapshot(t)
	if changed := diffSnapshots(c.installed, now); len(changed) > 0 {
		t.Fatalf("install left %v unlike an uninterrupted install", changed)
	}
}

// kubeProxy is the kube-proxy DaemonSet.
func (c *interruptCluster) kubeProxy(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	ds, err := c.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(context.Background(), "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// kill runs cmd (install or revert) through a KillProxy, checks it died at
// point of step steps[i], and returns the proxy (with the writes the command
// made).
func (c *interruptCluster) kill(t *testing.T, cmd string, i int, point string, onArm func()) *harness.KillProxy {
	t.Helper()
	steps := layoutSteps(layout.YurtTunnel)
	step := steps[i]
	kp := newKillProxy(t, c.ControlPlane, cmd, step, point, onArm)
	args := installFlags
	if cmd != "install" {
		args = []string{cmd}
	}
	p := c.start(t, kp.Kubeconfig, args...)
	kp.Attach(p)
	err := p.Wait(t, 2*time.Minute)
	where := kp.KilledAt()
	if where == "" {
		t.Fatalf("%s ended (%v) without reaching the kill point:\n%s", cmd, err, p.Output())
	}
	t.Logf("killed %s %s", cmd, where)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s ended with %v, not by SIGKILL:\n%s", cmd, err, p.Output())
	}
	data := c.installState(t)
	state := decodeState(t, data)
	s, ok := state[step]
	if cmd == "install" {
		switch {
		case point == afterStep && (!ok || !s.Applied):
			t.Fatalf("killed after step %s, but the state does not record it applied: %+v", step, state)
		case point == afterStep && i+1 < len(steps) && state[steps[i+1]].Records != nil:
			t.Fatalf("killed after step %s, but step %s had begun: %+v", step, steps[i+1], state)
		case point == midStep && (!ok || s.Applied || len(s.Records) == 0):
			t.Fatalf("killed in the middle of step %s, but the state says %+v", step, state)
		}
		return kp
	}
	// Revert goes last step first, deleting each step's entry once undone.
	for _, later := range steps[i+1:] {
		if _, ok := state[later]; ok {
			t.Fatalf("killed reverting step %s, but step %s is still in the state: %+v", step, later, state)
		}
	}
	switch {
	case data == nil:
		t.Fatalf("killed reverting step %s, but the state is gone", step)
	case point == afterStep && ok:
		t.Fatalf("killed after reverting step %s, but the state still has it: %+v", step, state)
	case point == afterStep && i > 0 && !state[steps[i-1]].Applied:
		t.Fatalf("killed after reverting step %s, but step %s is no longer recorded applied: %+v", step, steps[i-1], state)
	case point == midStep && (!ok || !s.Applied):
		t.Fatalf("killed in the middle of reverting step %s, but the state says %+v", step, state)
	}
	return kp
}

// revert runs revert, reaching the apiserver through kubeconfig, and checks
// every original is back and the objects install created and its state are
// gone; lost counts the originals not restored.
func (c *interruptCluster) revert(t *testing.T, kubeconfig string) (restored bool, lost int) {
	t.Helper()
	p := c.start(t, kubeconfig, "revert")
	err := p.Wait(t, 2*time.Minute)
	if out := p.Output(); err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	t.Logf("revert:\n%s", p.Output())
	restored = true
	now := c.snapshot(t)
	for _, changed := range diffSnapshots(c.original, now) {
		restored = false
		lost++
		t.Errorf("revert left %s changed:\n%s\nwant:\n%s", changed, now[changed], c.original[changed])
	}
	if left := c.createdObjects(t); len(left) > 0 {
		restored = false
		t.Errorf("revert left objects install created: %v", slices.Sorted(maps.Keys(left)))
	}
	if _, err := c.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(context.Background(), engine.StateConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		restored = false
		t.Errorf("install state after revert: %v", err)
	}
	return restored, lost
}

// allApplied reports whether status listed every step as applied (a
// "not applied" line contains " applied" too, so the lines are parsed).
func allApplied(status string) bool {
	applied := map[string]bool{}
	for _, line := range strings.Split(status, "\n") {
		// A step install skipped as not for this cluster (prometheus without
		// prometheus-operator) counts as done.
		if f := strings.Fields(line); len(f) >= 2 && (f[1] == "applied" || strings.Contains(line, "(skipped by install:")) {
			applied[f[0]] = true
		}
	}
	for _, s := range layoutSteps(layout.YurtTunnel) {
		if !applied[s] {
			return false
		}
	}
	return true
}

// installState is the data of the install state ConfigMap (nil when
// absent, empty when it records no step).
func (k *kubeadmCluster) installState(t *testing.T) map[string]string {
	t.Helper()
	cm, err := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(context.Background(), engine.StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data == nil {
		return map[string]string{}
	}
	return cm.Data
}

type stepRecord struct {
	Applied bool                       `json:"applied"`
	Records map[string]json.RawMessage `json:"records"`
}

func decodeState(t *testing.T, data map[string]string) map[string]stepRecord {
	t.Helper()
	out := map[string]stepRecord{}
	for name, v := range data {
		var s stepRecord
		if err := json.Unmarshal([]byte(v), &s); err != nil {
			t.Fatalf("install state of %s: %v", name, err)
		}
		out[name] = s
	}
	return out
}

// createdObjects are the objects labelled as created by install (the state
// ConfigMap aside), each rendered without the fields the apiserver and the
// stand-in controllers fill in.
func (k *kubeadmCluster) createdObjects(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	ns := tunnelnodes.Namespace
	opts := metav1.ListOptions{LabelSelector: engine.ManagedByLabel + "=yurtdns"}
	out := map[string]string{}
	add := func(kind string, list any, err error) {
		if err != nil {
			t.Fatalf("listing %s: %v", kind, err)
		}
		b, _ := json.Marshal(list)
		var l struct {
			Items []map[string]any `json:"items"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Items {
			meta, _ := o["metadata"].(map[string]any)
			name, _ := meta["name"].(string)
			if kind == "ConfigMap" && name == engine.StateConfigMap {
				continue
			}
			for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"} {
				delete(meta, f)
			}
			delete(o, "status")
			b, _ := json.Marshal(o)
			out[kind+" "+name] = string(b)
		}
	}
	sas, err := k.Client.CoreV1().ServiceAccounts(ns).List(ctx, opts)
	add("ServiceAccount", sas, err)
	cms, err := k.Client.CoreV1().ConfigMaps(ns).List(ctx, opts)
	add("ConfigMap", cms, err)
	roles, err := k.Client.RbacV1().Roles(ns).List(ctx, opts)
	add("Role", roles, err)
	rbs, err := k.Client.RbacV1().RoleBindings(ns).List(ctx, opts)
	add("RoleBinding", rbs, err)
	crs, err := k.Client.RbacV1().ClusterRoles().List(ctx, opts)
	add("ClusterRole", crs, err)
	crbs, err := k.Client.RbacV1().ClusterRoleBindings().List(ctx, opts)
	add("ClusterRoleBinding", crbs, err)
	deps, err := k.Client.AppsV1().Deployments(ns).List(ctx, opts)
	add("Deployment", deps, err)
	dss, err := k.Client.AppsV1().DaemonSets(ns).List(ctx, opts)
	add("DaemonSet", dss, err)
	jobs, err := k.Client.BatchV1().Jobs(ns).List(ctx, opts)
	add("Job", jobs, err)
	return out
}

// interruptRule kills install or revert (cmd) at a point of a step, read
// from what the process has recorded in the install state so far: the
// harness's KillProxy asks it at every request.
type interruptRule struct {
	cp          *harness.ControlPlane
	cmd         string // install or revert
	step, point string
	// onArm runs once when the step begins (before its first write is sent).
	onArm func()
	armed bool // midStep: the step has begun, its next write is the step's
}

// newKillProxy is a KillProxy that kills cmd at point of step; without a
// point it only forwards, recording the writes.
func newKillProxy(t *testing.T, cp *harness.ControlPlane, cmd, step, point string, onArm func()) *harness.KillProxy {
	t.Helper()
	if point == "" {
		return harness.NewKillProxy(t, cp, harness.KillRule{})
	}
	r := &interruptRule{cp: cp, cmd: cmd, step: step, point: point, onArm: onArm}
	return harness.NewKillProxy(t, cp, harness.KillRule{BeforeSend: r.beforeSend, AfterWrite: r.afterWrite})
}

// isStateWrite: the request writes the install state.
func isStateWrite(req *http.Request) bool {
	return strings.HasSuffix(req.URL.Path, "/configmaps/"+engine.StateConfigMap)
}

func (r *interruptRule) beforeSend(req *http.Request, what string, write bool) string {
	if write && r.point == midStep && !r.armed {
		// The step has begun, and nothing of it is written yet: this is its first write.
		_, r.armed = r.progress(req.Context())
		if r.armed && r.onArm != nil {
			r.onArm()
		}
	}
	if r.armed && write && isStateWrite(req) && r.step == "control-plane" {
		// The step wrote what it writes outside the apiserver (manifest
		// files) and is about to record progress: die before that lands.
		return "in step " + r.step + " before " + what + " (not sent)"
	}
	return ""
}

func (r *interruptRule) afterWrite(req *http.Request, what string) string {
	// A state write inside the step (revert saves that it is restoring a
	// value before writing it back) is not the step's write: die after that.
	if r.armed && !isStateWrite(req) {
		return "in step " + r.step + " after " + what + " reached the apiserver"
	}
	if r.point != afterStep {
		return ""
	}
	if done, _ := r.progress(req.Context()); done && r.cmd == "install" {
		return "after step " + r.step + " was recorded applied (" + what + ")"
	} else if done {
		return "after step " + r.step + " was reverted and its state entry deleted (" + what + ")"
	}
	return ""
}

// progress reads back what the process has recorded so far (whatever
// encoding its requests used): whether it is done with the step, and
// whether it has begun it without being done. Install records a step
// applied once done, after the write-ahead record of its first change;
// revert goes last step first and deletes each step's entry once done.
func (r *interruptRule) progress(ctx context.Context) (done, begun bool) {
	cm, err := r.cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(ctx, engine.StateConfigMap, metav1.GetOptions{})
	if err != nil {
		return false, false
	}
	var s stepRecord
	_, ok := cm.Data[r.step]
	if ok && json.Unmarshal([]byte(cm.Data[r.step]), &s) != nil {
		return false, false
	}
	if r.cmd == "install" {
		return ok && s.Applied, ok && !s.Applied
	}
	steps := layoutSteps(layout.YurtTunnel)
	for _, later := range steps[slices.Index(steps, r.step)+1:] {
		if _, ok := cm.Data[later]; ok {
			return false, false // not reverted yet
		}
	}
	return !ok, ok
}

func unionKeys(a, b map[string]string) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
