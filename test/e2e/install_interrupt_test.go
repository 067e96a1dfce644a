package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// installFlags are the flags of every install in this file.
var installFlags = []string{"install", "--coredns-image", "coredns-yurt:test", "--sync-image", "tunnel-nodes-sync:test"}

// Where an install is killed.
const (
	// afterStep: right after the state update that marks the step applied,
	// before the next step has read or written anything.
	afterStep = "after-step"
	// midStep: the step's write-ahead record is saved and the step's first
	// write has reached the apiserver (for control-plane: the manifest files
	// are written), and nothing after it has: the process dies waiting for
	// that write's answer.
	midStep = "mid-step"
)

// TestInstallInterrupted kills `install` (SIGKILL) at two points of each
// step in turn — right after the step completed, and in the middle of it,
// between its write-ahead record and the rest of its writes — then runs
// install again: it must complete, status must report every step applied,
// and the cluster (objects, created objects, manifest files and the install
// state itself) must equal what an uninterrupted install produces. Revert
// must then restore every original and remove the state.
//
// The kill points are exact, not raced: the killed install reaches the
// apiserver through a proxy in this test, which sends SIGKILL while the
// process is blocked on the request that marks the point (a watch on the
// state ConfigMap would see the update milliseconds later, by which time the
// process has made its next few writes).
//
// Control planes are reused: each case starts from the originals the
// previous revert restored (so revert→install cycles are tested too). The
// steps run on two control planes side by side, because an install spends
// most of its time in its client's rate limiter; a step whose case failed
// hands its control plane back as unusable and the next step starts afresh.
func TestInstallInterrupted(t *testing.T) {
	const lanes = 2
	var mu sync.Mutex
	var tally struct{ cases, after, mid, converged, restored, lost int }
	t.Cleanup(func() {
		t.Logf("%d interruptions: %d after-step, %d mid-step; reruns converged %d/%d; reverts restored originals %d/%d; %d values lost",
			tally.cases, tally.after, tally.mid, tally.converged, tally.cases, tally.restored, tally.cases, tally.lost)
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
	steps := install.StepNames()
	for i, step := range steps {
		t.Run(step, func(t *testing.T) {
			lane(t, func(run func(string, func(*testing.T, *interruptCluster))) {
				for _, point := range []string{afterStep, midStep} {
					run(point, func(t *testing.T, c *interruptCluster) {
						var res interruptResult
						defer func() { // counted also when the case stops early
							mu.Lock()
							defer mu.Unlock()
							tally.cases++
							if point == afterStep {
								tally.after++
							} else {
								tally.mid++
							}
							tally.lost += res.lost
							if res.converged {
								tally.converged++
							}
							if res.restored {
								tally.restored++
							}
						}()
						c.interrupt(t, i, point, &res)
					})
				}
			})
		})
	}

	// Revert straight after a kill, without installing again, undoes the
	// steps install completed and the part of the step it was killed in.
	t.Run("revert-after-kill", func(t *testing.T) {
		lane(t, func(run func(string, func(*testing.T, *interruptCluster))) {
			run("kube-proxy", func(t *testing.T, c *interruptCluster) {
				c.kill(t, slices.Index(steps, "kube-proxy"), midStep)
				if restored, lost := c.revert(t); !restored || lost > 0 {
					t.Errorf("revert straight after the kill: %d values not restored", lost)
				}
			})
		})
	})
}

// interruptCluster is a kubeadm cluster with what an uninterrupted install
// makes of it, to compare interrupted ones against.
type interruptCluster struct {
	*kubeadmCluster
	original  map[string]string // snapshot before install (and after each revert)
	installed map[string]string // snapshot after an uninterrupted install
	created   map[string]string // objects an uninterrupted install created
	state     map[string]string // the install state it recorded
}

func newInterruptCluster(t *testing.T) *interruptCluster {
	k := newKubeadmCluster(t)
	t.Cleanup(k.PlayRolloutControllers(tunnelnodes.Namespace))
	c := &interruptCluster{kubeadmCluster: k, original: k.snapshot(t)}
	if out, err := k.run(t, installFlags...); err != nil {
		t.Fatalf("uninterrupted install: %v\n%s", err, out)
	}
	c.installed, c.created, c.state = k.snapshot(t), k.createdObjects(t), k.installState(t)
	if len(c.created) == 0 || len(c.state) != len(install.StepNames()) {
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

type interruptResult struct {
	converged, restored bool
	lost                int // original values not restored, or recorded wrong
}

// interrupt kills install at point of step steps[i], runs it again and
// checks the outcome against an uninterrupted install, reverts, and checks
// the originals are back; res says how it went so far.
func (c *interruptCluster) interrupt(t *testing.T, i int, point string, res *interruptResult) {
	ctx := context.Background()
	step := install.StepNames()[i]
	proxyGen := func() int64 {
		ds, err := c.Client.AppsV1().DaemonSets(tunnelnodes.Namespace).Get(ctx, "kube-proxy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ds.Generation
	}
	gen0 := proxyGen()
	c.kill(t, i, point)
	if point == midStep {
		// Revert would undo the part of the step done so far too.
		if out, err := c.run(t, "revert", "--dry-run"); err != nil || !strings.Contains(out, "["+step+"] would: ") {
			t.Errorf("revert --dry-run after a kill in the middle of %s does not undo it: %v\n%s", step, err, out)
		}
	}

	// Install again: it completes and the cluster is as an uninterrupted install leaves it.
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
	if gen := proxyGen(); gen <= gen0 {
		res.converged = false
		t.Errorf("kube-proxy was not restarted after its config changed (DaemonSet generation %d before, %d after)", gen0, gen)
	}

	restored, lost := c.revert(t)
	res.restored, res.lost = restored, res.lost+lost
}

// kill runs install through a killProxy and checks it died at point of
// step steps[i].
func (c *interruptCluster) kill(t *testing.T, i int, point string) {
	t.Helper()
	steps := install.StepNames()
	step := steps[i]
	kp := newKillProxy(t, c.ControlPlane, step, point)
	p := c.start(t, kp.kubeconfig, installFlags...)
	kp.process <- p
	err := p.Wait(t, 2*time.Minute)
	where := kp.killedAt()
	if where == "" {
		t.Fatalf("install ended (%v) without reaching the kill point:\n%s", err, p.Output())
	}
	t.Logf("killed %s", where)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("install ended with %v, not by SIGKILL:\n%s", err, p.Output())
	}
	state := decodeState(t, c.installState(t))
	switch s, ok := state[step]; {
	case point == afterStep && (!ok || !s.Applied):
		t.Fatalf("killed after step %s, but the state does not record it applied: %+v", step, state)
	case point == afterStep && i+1 < len(steps) && state[steps[i+1]].Records != nil:
		t.Fatalf("killed after step %s, but step %s had begun: %+v", step, steps[i+1], state)
	case point == midStep && (!ok || s.Applied || len(s.Records) == 0):
		t.Fatalf("killed in the middle of step %s, but the state says %+v", step, state)
	}
}

// revert runs revert and checks every original is back and the objects
// install created and its state are gone; lost counts the originals not
// restored.
func (c *interruptCluster) revert(t *testing.T) (restored bool, lost int) {
	t.Helper()
	out, err := c.run(t, "revert")
	if err != nil {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	t.Logf("revert:\n%s", out)
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
	if _, err := c.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(context.Background(), install.StateConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
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
		if f := strings.Fields(line); len(f) >= 2 && f[1] == "applied" {
			applied[f[0]] = true
		}
	}
	for _, s := range install.StepNames() {
		if !applied[s] {
			return false
		}
	}
	return true
}

// installState is the data of the install state ConfigMap (nil when absent).
func (k *kubeadmCluster) installState(t *testing.T) map[string]string {
	t.Helper()
	cm, err := k.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(context.Background(), install.StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
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
	opts := metav1.ListOptions{LabelSelector: install.ManagedByLabel + "=yurtdns"}
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
			if kind == "ConfigMap" && name == install.StateConfigMap {
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

// killProxy stands between the install under test and the apiserver and
// SIGKILLs the install at a point of a step, while the install is blocked
// on the request that marks the point. After the kill it forwards nothing.
type killProxy struct {
	kubeconfig string
	process    chan *harness.Process

	cp          *harness.ControlPlane
	base        http.RoundTripper
	step, point string

	mu     sync.Mutex
	armed  bool   // midStep: the step's write-ahead record is saved
	killed string // where, once killed
}

func newKillProxy(t *testing.T, cp *harness.ControlPlane, step, point string) *killProxy {
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
	kp := &killProxy{process: make(chan *harness.Process, 1), cp: cp, base: base, step: step, point: point}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: kp,
		ErrorLog:  log.New(io.Discard, "", 0),
	})
	t.Cleanup(srv.Close)
	kp.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q}}]
users: [{name: proxy, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
current-context: proxy
`, srv.URL)
	if err := os.WriteFile(kp.kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return kp
}

func (kp *killProxy) killedAt() string {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	return kp.killed
}

// RoundTrip forwards one request of the install; requests are sequential,
// so the install makes no progress while one is held here.
func (kp *killProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	if kp.killed != "" {
		return nil, fmt.Errorf("install was killed")
	}
	mutating := req.Method != http.MethodGet && req.Method != http.MethodHead
	stateWrite := mutating && strings.HasSuffix(req.URL.Path, "/configmaps/"+install.StateConfigMap)
	what := req.Method + " " + req.URL.Path
	if kp.armed && mutating && stateWrite {
		// The step wrote what it writes outside the apiserver (manifest
		// files) and is about to record progress: die before that lands.
		kp.kill("in step " + kp.step + " before " + what + " (not sent)")
		return nil, fmt.Errorf("install was killed")
	}
	resp, err := kp.base.RoundTrip(req)
	if err != nil || !mutating || resp.StatusCode >= 300 {
		return resp, err
	}
	if kp.armed {
		kp.kill("in step " + kp.step + " after " + what + " reached the apiserver")
		return resp, nil
	}
	// What the install has recorded so far (read back, whatever encoding the request used).
	cm, err := kp.cp.Client.CoreV1().ConfigMaps(tunnelnodes.Namespace).Get(req.Context(), install.StateConfigMap, metav1.GetOptions{})
	if err != nil {
		return resp, nil
	}
	var s stepRecord
	if data, ok := cm.Data[kp.step]; !ok || json.Unmarshal([]byte(data), &s) != nil {
		return resp, nil
	}
	switch {
	case kp.point == afterStep && s.Applied:
		kp.kill("after step " + kp.step + " was recorded applied (" + what + ")")
	case kp.point == midStep && !s.Applied:
		kp.armed = true // the write-ahead record is saved: the next write is the step's
	}
	return resp, nil
}

// kill sends SIGKILL and waits until the process is gone.
func (kp *killProxy) kill(where string) {
	p := <-kp.process
	kp.process <- p
	_ = p.Signal(syscall.SIGKILL)
	for deadline := time.Now().Add(30 * time.Second); !p.Exited() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	kp.killed = where
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
