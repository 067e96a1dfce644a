package steps

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
)

// deploymentFlag is one flag on the command line of a kube-system
// Deployment's container: the container named as the Deployment, else its
// first one.
type deploymentFlag struct {
	deployment, flag string
	// boolean: a pflag bool flag, which may stand alone for true and never
	// takes the next argument as its value.
	boolean bool
}

// deploymentFlagStep is a fieldStep over f: desired says the flag's value
// install makes (see findFlag for the values), what is the step's line when
// it changes, and the Deployment's rollout is waited for after each write
// (its pods read the flag only at start). Without the Deployment install
// skips the step, saying "no Deployment ...: " + withoutIt.
func deploymentFlagStep(name string, f deploymentFlag, what, withoutIt string,
	desired func(cur string, exists bool) string) engine.Step {
	edit := kube.FieldEdit{
		Key: fmt.Sprintf("Deployment %s/%s %s", tunnelnodes.Namespace, f.deployment, f.flag),
		Get: func(ctx context.Context, env *engine.Env) (string, bool, error) {
			_, c, err := deploymentContainer(ctx, env, f.deployment)
			if err != nil {
				return "", false, err
			}
			_, value, _, found := findFlag(c, f.flag, f.boolean)
			return value, found, nil
		},
		// Read again on a conflict: the Deployment's status changes under
		// us while its pods restart (yurt-tunnel-server exits whenever the
		// control-plane step restarts kube-apiserver).
		Set: func(ctx context.Context, env *engine.Env, value string, exists bool) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				d, c, err := deploymentContainer(ctx, env, f.deployment)
				if err != nil {
					return err
				}
				setFlag(c, f.flag, f.boolean, value, exists)
				return env.Client.Update(ctx, d)
			})
		},
		Desired: func(_ *engine.Env, cur string, exists bool) (string, error) { return desired(cur, exists), nil },
	}
	rolledOut := func(ctx context.Context, env *engine.Env) error {
		return kubewait.For(ctx, env.Options.Timeout, "Deployment "+f.deployment+" not rolled out", kube.DeploymentRolledOut(env, f.deployment, nil))
	}
	return skipWhere(fieldStep(name, what, edit, rolledOut), func(ctx context.Context, env *engine.Env, _ *engine.StepState) (string, error) {
		err := env.Client.Get(ctx, kube.Key(f.deployment), &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return "no Deployment " + tunnelnodes.Namespace + "/" + f.deployment + ": " + withoutIt, nil
		}
		return "", err
	})
}

// deploymentContainer reads the named Deployment and returns its container
// of the same name (the first one when none is named so).
func deploymentContainer(ctx context.Context, env *engine.Env, name string) (*appsv1.Deployment, *corev1.Container, error) {
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, kube.Key(name), d); err != nil {
		return nil, nil, fmt.Errorf("reading Deployment %s: %w", name, err)
	}
	cs := d.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return nil, nil, fmt.Errorf("Deployment %s has no containers", name)
	}
	i := max(0, slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == name }))
	return d, &cs[i], nil
}

// findFlag finds flag on the container's command line. A string flag: its
// first occurrence in the args, then the command, as "--flag=value" or
// "--flag value" (separate). A boolean flag: its last occurrence on the
// command line (the command, then the args), which is the one pflag keeps,
// as "--flag=value" or alone, whose value is "" (pflag refuses
// "--flag=", so "" means alone only).
func findFlag(c *corev1.Container, flag string, boolean bool) (list *[]string, value string, i int, found bool) {
	lists := []*[]string{&c.Args, &c.Command}
	if boolean {
		lists = []*[]string{&c.Command, &c.Args}
	}
	list, i = &c.Args, -1
	for _, l := range lists {
		for j, a := range *l {
			v, assigned := strings.CutPrefix(a, flag+"=")
			switch {
			case assigned:
			case a == flag && boolean:
				v = ""
			case a == flag && j+1 < len(*l):
				v = (*l)[j+1]
			default:
				continue
			}
			list, value, i, found = l, v, j, true
			if !boolean {
				return list, value, i, found
			}
		}
	}
	return list, value, i, found
}

// setFlag writes flag's value where findFlag found it (keeping its form),
// appends "--flag=value" to the args when absent, and removes it when
// exists is false. A boolean flag's value "" is written as the flag alone.
func setFlag(c *corev1.Container, flag string, boolean bool, value string, exists bool) {
	list, _, i, found := findFlag(c, flag, boolean)
	separate := found && !boolean && (*list)[i] == flag
	arg := flag + "=" + value
	if boolean && value == "" {
		arg = flag
	}
	switch {
	case !found && exists:
		*list = append(*list, arg)
	case found && !exists && separate:
		*list = slices.Delete(*list, i, i+2)
	case found && !exists:
		*list = slices.Delete(*list, i, i+1)
	case separate:
		(*list)[i+1] = value
	case found:
		(*list)[i] = arg
	}
}
