package steps

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestSetFlag: the flag keeps its form (--flag=value or --flag value),
// is appended when absent and removed, both forms, on revert.
func TestSetFlag(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		value  string
		exists bool
		want   []string
	}{
		{[]string{"--v=4", "--controllers=-nodelifecycle,*"}, "X", true, []string{"--v=4", "--controllers=X"}},
		{[]string{"--controllers", "*", "--v=4"}, "X", true, []string{"--controllers", "X", "--v=4"}},
		{[]string{"--v=4"}, "X", true, []string{"--v=4", "--controllers=X"}},
		{[]string{"--controllers=X", "--v=4"}, "", false, []string{"--v=4"}},
		{[]string{"--v=4", "--controllers", "X"}, "", false, []string{"--v=4"}},
	} {
		c := &corev1.Container{Args: slices.Clone(tc.args)}
		setFlag(c, controllersFlag, false, tc.value, tc.exists)
		if !slices.Equal(c.Args, tc.want) {
			t.Errorf("setFlag(%q, %q, %v) = %q, want %q", tc.args, tc.value, tc.exists, c.Args, tc.want)
		}
		if _, v, _, found := findFlag(c, controllersFlag, false); found != tc.exists || v != tc.value {
			t.Errorf("after setFlag(%q): findFlag = %q, %v", strings.Join(tc.args, " "), v, found)
		}
	}
}

// TestBooleanFlag: a boolean flag is found as pflag reads it — alone it is
// "" and never takes the next argument, and its last occurrence on the
// command line counts — and setFlag writes it back in the same form, alone
// included.
func TestBooleanFlag(t *testing.T) {
	const flag = dnsControllerFlag
	for _, tc := range []struct {
		name          string
		command, args []string
		value         string // found
		found         bool
		set           string // written with setFlag(set, true)
		command2      []string
		args2         []string
	}{
		{name: "alone, another flag next", args: []string{flag, "--v=2"}, value: "", found: true,
			set: "false", args2: []string{flag + "=false", "--v=2"}},
		{name: "alone, last", args: []string{"--v=2", flag}, value: "", found: true,
			set: "false", args2: []string{"--v=2", flag + "=false"}},
		{name: "written back alone", args: []string{flag + "=false", "--v=2"}, value: "false", found: true,
			set: "", args2: []string{flag, "--v=2"}},
		{name: "assigned", args: []string{flag + "=true"}, value: "true", found: true,
			set: "false", args2: []string{flag + "=false"}},
		{name: "absent", args: []string{"--v=2"},
			set: "false", args2: []string{"--v=2", flag + "=false"}},
		{name: "the last occurrence counts", args: []string{flag + "=false", "--v=2", flag}, value: "", found: true,
			set: "false", args2: []string{flag + "=false", "--v=2", flag + "=false"}},
		{name: "the args come after the command", command: []string{"yurt-tunnel-server", flag + "=false"}, args: []string{flag + "=true"},
			value: "true", found: true, set: "false", command2: []string{"yurt-tunnel-server", flag + "=false"}, args2: []string{flag + "=false"}},
		{name: "in the command", command: []string{"yurt-tunnel-server", flag}, args: []string{"--v=2"}, value: "", found: true,
			set: "false", command2: []string{"yurt-tunnel-server", flag + "=false"}, args2: []string{"--v=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Command: slices.Clone(tc.command), Args: slices.Clone(tc.args)}
			if _, v, _, found := findFlag(c, flag, true); v != tc.value || found != tc.found {
				t.Errorf("findFlag = %q, %v; want %q, %v", v, found, tc.value, tc.found)
			}
			setFlag(c, flag, true, tc.set, true)
			if !slices.Equal(c.Command, tc.command2) || !slices.Equal(c.Args, tc.args2) {
				t.Errorf("setFlag(%q): command %q args %q; want %q %q", tc.set, c.Command, c.Args, tc.command2, tc.args2)
			}
		})
	}
}

// A Deployment's flag step on a cluster without the Deployment: install
// skips it saying why, and status says the same.
func TestDeploymentFlagStepWithoutDeployment(t *testing.T) {
	ctx := context.Background()
	env := &engine.Env{Client: fake.NewClientBuilder().Build()}
	want := "no Deployment kube-system/yurt-tunnel-server: no tunnel DNS controller writes yurt-tunnel-nodes"
	step := tunnelDNSStep()
	res, err := step.Install(ctx, env, newStepState())
	if err != nil || !res.Skipped || res.Summary != "skipped: "+want {
		t.Errorf("install: %+v, %v; want skipped: %s", res, err, want)
	}
	s, detail, err := step.Status(ctx, env, newStepState())
	if err != nil || s != engine.NotApplied || detail != "skipped by install: "+want {
		t.Errorf("status: %s (%s), %v", s, detail, err)
	}
}

// A write that meets a newer Deployment (its status moved while its pods
// restarted) is made again on the fresh object, not reported as a failure.
func TestDeploymentFlagStepRetriesOnConflict(t *testing.T) {
	ctx := context.Background()
	zero := int32(0)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: yurtTunnelServer, Namespace: "kube-system"},
		Spec: appsv1.DeploymentSpec{Replicas: &zero, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: yurtTunnelServer, Args: []string{"--enable-dns-controller=true"}}}}}}}
	conflicts := 0
	c := fake.NewClientBuilder().WithObjects(d).WithInterceptorFuncs(interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if conflicts == 0 {
				conflicts++
				return apierrors.NewConflict(appsv1.Resource("deployments"), obj.GetName(), errors.New("the object has been modified"))
			}
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	env := &engine.Env{Client: c, Options: engine.Options{Timeout: 5 * time.Second}}
	if res, err := tunnelDNSStep().Install(ctx, env, newStepState()); err != nil || !res.Changed {
		t.Fatalf("install after one conflict: %+v, %v", res, err)
	}
	got := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
		t.Fatal(err)
	}
	if args := got.Spec.Template.Spec.Containers[0].Args; conflicts != 1 || !slices.Equal(args, []string{"--enable-dns-controller=false"}) {
		t.Errorf("after %d conflicts the args are %q, want --enable-dns-controller=false", conflicts, args)
	}
}
