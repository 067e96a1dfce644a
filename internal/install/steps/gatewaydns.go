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
)

// The controller of yurt-manager that writes edge-tunnel-nodes: its
// registered name and alias (openyurt cmd/yurt-manager/names/controller_names.go).
const (
	gatewayDNSController = "gateway-dns-controller"
	gatewayDNSAlias      = "gatewaydns"
	controllersFlag      = "--controllers"
)

// gatewayDNSStep switches yurt-manager's gateway-dns controller off while
// the sync writes edge-tunnel-nodes, so two writers never fight over it:
// yurt-manager's --controllers gains -gateway-dns-controller, and its
// rollout is waited for. Revert restores the flag as it was.
func gatewayDNSStep() engine.Step {
	edit := kube.FieldEdit{
		Key: fmt.Sprintf("Deployment %s/%s %s", tunnelnodes.Namespace, yurtManager, controllersFlag),
		Get: func(ctx context.Context, env *engine.Env) (string, bool, error) {
			_, c, err := yurtManagerContainer(ctx, env)
			if err != nil {
				return "", false, err
			}
			_, value, _, found := findFlag(c, controllersFlag)
			return value, found, nil
		},
		Set: func(ctx context.Context, env *engine.Env, value string, exists bool) error {
			d, c, err := yurtManagerContainer(ctx, env)
			if err != nil {
				return err
			}
			setFlag(c, controllersFlag, value, exists)
			return env.Client.Update(ctx, d)
		},
		Desired: func(_ *engine.Env, cur string, exists bool) (string, error) {
			if !exists {
				return cur, nil // no --controllers: yurt-manager runs no controller
			}
			return disableGatewayDNS(cur), nil
		},
	}
	step := fieldStep("gateway-dns", "yurt-manager's gateway-dns controller switched off ("+controllersFlag+" gains -"+gatewayDNSController+
		"): the sync is the only writer of "+tunnelnodes.RavenConfigMapName+"; yurt-manager rolled out", edit, waitYurtManager)
	install := step.Install
	step.Install = func(ctx context.Context, env *engine.Env, ss *engine.StepState) (engine.Result, error) {
		err := env.Client.Get(ctx, kube.Key(yurtManager), &appsv1.Deployment{})
		if apierrors.IsNotFound(err) {
			return engine.Result{Skipped: true, Summary: "skipped: no Deployment " + tunnelnodes.Namespace + "/" + yurtManager +
				": no gateway-dns controller writes " + tunnelnodes.RavenConfigMapName}, nil
		}
		if err != nil {
			return engine.Result{}, err
		}
		return install(ctx, env, ss)
	}
	return step
}

// yurtManagerContainer reads the yurt-manager Deployment and returns its
// yurt-manager container (the first one when none is named so).
func yurtManagerContainer(ctx context.Context, env *engine.Env) (*appsv1.Deployment, *corev1.Container, error) {
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, kube.Key(yurtManager), d); err != nil {
		return nil, nil, fmt.Errorf("reading Deployment %s: %w", yurtManager, err)
	}
	cs := d.Spec.Template.Spec.Containers
	if len(cs) == 0 {
		return nil, nil, fmt.Errorf("Deployment %s has no containers", yurtManager)
	}
	i := max(0, slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == yurtManager }))
	return d, &cs[i], nil
}

// waitYurtManager waits for yurt-manager's rollout: its pods run the new flag.
func waitYurtManager(ctx context.Context, env *engine.Env) error {
	return kubewait.For(ctx, env.Options.Timeout, "Deployment "+yurtManager+" not rolled out", kube.DeploymentRolledOut(env, yurtManager, nil))
}

// gatewayDNSEnabled says whether yurt-manager runs the gateway-dns
// controller with this --controllers list, as it decides: entries are taken
// as pflag splits them (commas, nothing trimmed), an alias stands for its
// controller, the first entry naming the controller decides ("-" off), and
// without one "*" turns it on (it is not off by default).
func gatewayDNSEnabled(list string) bool {
	star := false
	for _, e := range strings.Split(list, ",") {
		name, off := strings.CutPrefix(e, "-")
		if name == gatewayDNSController || name == gatewayDNSAlias {
			return !off
		}
		star = star || e == "*"
	}
	return star
}

// disableGatewayDNS returns the --controllers list with the gateway-dns
// controller off: unchanged when it is off already, else with
// -gateway-dns-controller first, so it decides whatever follows.
func disableGatewayDNS(list string) string {
	if !gatewayDNSEnabled(list) {
		return list
	}
	return "-" + gatewayDNSController + "," + list
}

// findFlag finds flag in the container's args, then its command, as
// "--flag=value" or "--flag value" (separate).
func findFlag(c *corev1.Container, flag string) (args *[]string, value string, i int, found bool) {
	for _, list := range []*[]string{&c.Args, &c.Command} {
		for i, a := range *list {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return list, v, i, true
			}
			if a == flag && i+1 < len(*list) {
				return list, (*list)[i+1], i, true
			}
		}
	}
	return &c.Args, "", -1, false
}

// setFlag writes flag's value where findFlag found it (keeping its form),
// appends "--flag=value" to the args when absent, and removes it when
// exists is false.
func setFlag(c *corev1.Container, flag, value string, exists bool) {
	list, _, i, found := findFlag(c, flag)
	separate := found && (*list)[i] == flag
	switch {
	case !found && exists:
		*list = append(*list, flag+"="+value)
	case found && !exists && separate:
		*list = slices.Delete(*list, i, i+2)
	case found && !exists:
		*list = slices.Delete(*list, i, i+1)
	case separate:
		(*list)[i+1] = value
	case found:
		(*list)[i] = flag + "=" + value
	}
}
