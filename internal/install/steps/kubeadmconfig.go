package steps

import (
	"context"
	"fmt"
	"strings"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubeadmconfig"
	"github.com/yurtdns/yurtdns/internal/staticpod"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The control-plane step's flags also go into kubeadm's ClusterConfiguration
// (kube-system/kubeadm-config), so that kubeadm upgrade, `init phase
// control-plane` and `join --control-plane` render them.

// kubeadmDefaultControllers is kube-controller-manager's --controllers as
// kubeadm renders it when extraArgs has none.
const kubeadmDefaultControllers = "*,bootstrapsigner,tokencleaner"

// installArgs are the extraArgs install sets on a ClusterConfiguration:
// the address types always, the node lifecycle controller off unless kept.
func installArgs(clusterConfig string, keepNodeLifecycle bool) ([]kubeadmconfig.Arg, error) {
	args := []kubeadmconfig.Arg{{Component: kubeadmconfig.APIServer, Name: "kubelet-preferred-address-types", Value: staticpod.PreferredAddressTypes}}
	if keepNodeLifecycle {
		return args, nil
	}
	controllers, ok, err := kubeadmconfig.ExtraArg(clusterConfig, kubeadmconfig.ControllerManager, "controllers")
	if err != nil {
		return nil, err
	}
	if !ok {
		controllers = kubeadmDefaultControllers
	}
	return append(args, kubeadmconfig.Arg{Component: kubeadmconfig.ControllerManager, Name: "controllers",
		Value: staticpod.ControllersWithoutNodeLifecycle(controllers, true)}), nil
}

// installedArgs are the extraArgs an install recorded setting: those whose
// value it wrote differs from the one before.
func installedArgs(rec engine.Record) ([]kubeadmconfig.Arg, error) {
	var args []kubeadmconfig.Arg
	for _, a := range []kubeadmconfig.Arg{{Component: kubeadmconfig.APIServer, Name: "kubelet-preferred-address-types"},
		{Component: kubeadmconfig.ControllerManager, Name: "controllers"}} {
		after, ok, err := kubeadmconfig.ExtraArg(rec.After, a.Component, a.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		before, had, err := kubeadmconfig.ExtraArg(rec.Before, a.Component, a.Name)
		if err != nil {
			return nil, err
		}
		if !had || before != after {
			a.Value = after
			args = append(args, a)
		}
	}
	return args, nil
}

// kubeadmConfigEdit is the control-plane step's edit of kubeadm-config.
func kubeadmConfigEdit(keepNodeLifecycle bool) kube.FieldEdit {
	edit := kube.ConfigMapKeyEdit(kubeadmconfig.ConfigMap, kubeadmconfig.Key, func(_ *engine.Env, current string, _ bool) (string, error) {
		args, err := installArgs(current, keepNodeLifecycle)
		if err != nil {
			return "", err
		}
		return kubeadmconfig.SetExtraArgs(current, args)
	})
	edit.Undo = func(_ *engine.Env, current string, rec engine.Record) (string, error) {
		args, err := installedArgs(rec)
		if err != nil {
			return "", fmt.Errorf("the recorded ClusterConfiguration: %w", err)
		}
		return kubeadmconfig.UnsetExtraArgs(current, args, rec.Before)
	}
	return edit
}

// hasKubeadmConfig: a cluster kubeadm did not make has nothing to edit.
func hasKubeadmConfig(ctx context.Context, env *engine.Env) (bool, error) {
	err := env.Client.Get(ctx, kube.Key(kubeadmconfig.ConfigMap), &corev1.ConfigMap{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// kubeadmConfigMissing names the install flags kubeadm-config lacks, "" when
// it has them all (or there is none).
func kubeadmConfigMissing(ctx context.Context, env *engine.Env, keepNodeLifecycle bool) (string, error) {
	if ok, err := hasKubeadmConfig(ctx, env); err != nil || !ok {
		return "", err
	}
	edit := kubeadmConfigEdit(keepNodeLifecycle)
	cur, _, err := edit.Get(ctx, env)
	if err != nil {
		return "", err
	}
	args, err := installArgs(cur, keepNodeLifecycle)
	if err != nil {
		return edit.Key + ": " + err.Error(), nil
	}
	var missing []string
	for _, a := range args {
		if v, ok, err := kubeadmconfig.ExtraArg(cur, a.Component, a.Name); err != nil || !ok || v != a.Value {
			missing = append(missing, fmt.Sprintf("%s.extraArgs %s=%s", a.Component, a.Name, a.Value))
		}
	}
	if len(missing) == 0 {
		return "", nil
	}
	return edit.Key + " lacks " + strings.Join(missing, ", "), nil
}
