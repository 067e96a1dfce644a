package install

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The tunnel layouts install knows (--profile).
const (
	ProfileYurtTunnel = "yurt-tunnel"
	ProfileRaven      = "raven"
)

// ravenSteps are install's steps under Raven's L7 proxy, in order. Under
// Raven the apiserver resolves node names at raven-proxy-dns (Raven's
// docs point it there), so that Deployment becomes coredns-yurt in place;
// the cluster's own CoreDNS, kube-dns, kube-proxy and the static pods are
// left as they are (see the README's profile table), and the sync runs
// with Raven's rules once yurt-manager's gateway-dns controller is off.
func ravenSteps() []Step {
	return []Step{recordsStep(), ravenRBACStep(), ravenCorefileStep(), ravenProxyDNSStep(), gatewayDNSStep(), syncStepOf("raven-sync", deploy.TunnelNodesSyncRaven)}
}

// profileSteps are the profile's steps, in order ("" is yurt-tunnel).
func profileSteps(profile string) []Step {
	if profile == ProfileRaven {
		return ravenSteps()
	}
	return Steps()
}

// ProfileStepNames lists the profile's step names, for --skip and help.
func ProfileStepNames(profile string) []string {
	var names []string
	for _, s := range profileSteps(profile) {
		names = append(names, s.Name)
	}
	return names
}

// checkProfile refuses to revert or report a state that install wrote under
// the other profile: its steps would be skipped as "not applied".
func (s *state) checkProfile(profile string) error {
	mine := ProfileStepNames(profile)
	for name := range s.steps {
		if slices.Contains(mine, name) {
			continue
		}
		for _, other := range []string{ProfileYurtTunnel, ProfileRaven} {
			if slices.Contains(ProfileStepNames(other), name) {
				return fmt.Errorf("the install state holds step %s of --profile %s: run with --profile %s", name, other, other)
			}
		}
	}
	return nil
}

// preflight refuses a profile whose objects the cluster lacks, and hints
// at --profile raven when a yurt-tunnel install finds Raven's layout.
func preflight(ctx context.Context, env *Env, out io.Writer) error {
	exists := func(obj client.Object, name string) (bool, error) {
		err := env.Client.Get(ctx, key(name), obj)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	raven, err := exists(&corev1.ConfigMap{}, tunnelnodes.RavenGlobalConfigName)
	if err != nil {
		return err
	}
	if env.Options.Profile != ProfileRaven {
		tunnel, err := exists(&corev1.Service{}, tunnelnodes.ServiceName)
		if err == nil && raven && !tunnel {
			fmt.Fprintf(out, "hint: this cluster has Raven's layout (ConfigMap %s/%s, no Service %s): did you mean --profile raven?\n",
				tunnelnodes.Namespace, tunnelnodes.RavenGlobalConfigName, tunnelnodes.ServiceName)
		}
		return err
	}
	if !raven {
		return fmt.Errorf("--profile raven: no ConfigMap %s/%s, so this cluster does not run Raven (install Raven and its L7 proxy first, or use --profile yurt-tunnel)",
			tunnelnodes.Namespace, tunnelnodes.RavenGlobalConfigName)
	}
	if ok, err := exists(&appsv1.Deployment{}, ravenProxyDNS); err != nil || !ok {
		return fmt.Errorf("--profile raven: no Deployment %s/%s (apply Raven's config/setup/raven-proxy-dns.yaml first, as its L7 proxy docs say): %v",
			tunnelnodes.Namespace, ravenProxyDNS, err)
	}
	return nil
}

// profileRules are the profile's rules for the cluster as it is now, for
// --verify-dns: yurt-tunnel's edge selector and tunnel Service, or Raven's
// raven-cfg and proxy Service.
func profileRules(ctx context.Context, env *Env, edge labels.Selector) (tunnelnodes.Rules, error) {
	service := tunnelnodes.ServiceName
	if env.Options.Profile == ProfileRaven {
		service = tunnelnodes.RavenServiceName
	}
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, key(service), svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		svc = nil
	}
	tunnelIP := tunnelnodes.TunnelClusterIP(svc)
	if env.Options.Profile != ProfileRaven {
		return tunnelnodes.YurtTunnelRules(edge, tunnelIP), nil
	}
	cfg := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, key(tunnelnodes.RavenGlobalConfigName), cfg); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	return tunnelnodes.RavenRules(tunnelnodes.RavenProxyEnabled(cfg.Data), tunnelIP), nil
}

// profileOrDefault names the profile an empty --profile means.
func profileOrDefault(profile string) string {
	if profile == "" {
		return ProfileYurtTunnel
	}
	return profile
}

// validProfile checks --profile.
func validProfile(profile string) error {
	if profile != "" && profile != ProfileYurtTunnel && profile != ProfileRaven {
		return fmt.Errorf("--profile %q: must be %s", profile, strings.Join([]string{ProfileYurtTunnel, ProfileRaven}, " or "))
	}
	return nil
}

// loadProfileState is loadState for --profile's steps.
func loadProfileState(ctx context.Context, env *Env) (*state, error) {
	if err := validProfile(env.Options.Profile); err != nil {
		return nil, err
	}
	st, err := loadState(ctx, env)
	if err != nil {
		return nil, err
	}
	return st, st.checkProfile(env.Options.Profile)
}
