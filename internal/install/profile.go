package install

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/internal/tunnelsync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The tunnel layouts install knows (--profile).
const (
	ProfileYurtTunnel = "yurt-tunnel"
	ProfileRaven      = "raven"
)

// profile is everything that differs between the tunnel layouts, looked up
// by --profile's value from profiles: no other code compares the name.
type profile struct {
	name string
	// help is --profile's description of the layout.
	help string
	// sync holds the names the sync's --profile presets (records ConfigMap,
	// tunnel Service, Raven's config).
	sync tunnelsync.Profile
	// steps are install's steps, in order; revert runs them backwards.
	steps func() []Step
	// check refuses a cluster the layout does not fit (exists reports
	// whether an object of kube-system exists).
	check func(exists func(client.Object, string) (bool, error), out io.Writer) error
	// rules are the layout's rules for the cluster as it is now.
	rules func(ctx context.Context, env *Env, tunnelIP netip.Addr) (tunnelnodes.Rules, error)
	// proxiesCloudNodes: the rules map cloud nodes to the tunnel too
	// (--verify-dns calls them "proxy", not "edge").
	proxiesCloudNodes bool
	// yurthostsOptions are the lines of a yurthosts block (before its
	// fallthrough) that read this layout's records.
	yurthostsOptions []string
	// dnsServiceAccount is the ServiceAccount install lets read the records
	// (the node-local caches run as it).
	dnsServiceAccount string
}

// profiles are the layouts of --profile; the first is the default.
var profiles = []profile{
	{
		name: ProfileYurtTunnel, help: "yurt-tunnel",
		sync:              tunnelsync.Profiles[ProfileYurtTunnel],
		steps:             Steps,
		yurthostsOptions:  []string{shardsOption},
		dnsServiceAccount: corednsName,
		check: func(exists func(client.Object, string) (bool, error), out io.Writer) error {
			raven, err := exists(&corev1.ConfigMap{}, tunnelnodes.RavenGlobalConfigName)
			if err != nil {
				return err
			}
			tunnel, err := exists(&corev1.Service{}, tunnelnodes.ServiceName)
			if err == nil && raven && !tunnel {
				fmt.Fprintf(out, "hint: this cluster has Raven's layout (ConfigMap %s/%s, no Service %s): did you mean --profile raven?\n",
					tunnelnodes.Namespace, tunnelnodes.RavenGlobalConfigName, tunnelnodes.ServiceName)
			}
			return err
		},
		rules: func(_ context.Context, _ *Env, tunnelIP netip.Addr) (tunnelnodes.Rules, error) {
			return tunnelnodes.YurtTunnelRules(tunnelIP), nil
		},
	},
	{
		// Under Raven the apiserver resolves node names at raven-proxy-dns
		// (Raven's docs point it there), so that Deployment becomes
		// coredns-yurt in place; the cluster's own CoreDNS, kube-dns,
		// kube-proxy and the static pods are left as they are (see the
		// README's profile table), and the sync runs with Raven's rules once
		// yurt-manager's gateway-dns controller is off.
		name: ProfileRaven, help: "Raven's L7 proxy",
		sync:              tunnelsync.Profiles[ProfileRaven],
		steps:             ravenSteps,
		yurthostsOptions:  ravenYurthostsOptions,
		dnsServiceAccount: ravenProxyDNS,
		check: func(exists func(client.Object, string) (bool, error), _ io.Writer) error {
			if ok, err := exists(&corev1.ConfigMap{}, tunnelnodes.RavenGlobalConfigName); err != nil || !ok {
				return fmt.Errorf("--profile raven: no ConfigMap %s/%s, so this cluster does not run Raven (install Raven and its L7 proxy first, or use --profile yurt-tunnel): %v",
					tunnelnodes.Namespace, tunnelnodes.RavenGlobalConfigName, err)
			}
			if ok, err := exists(&appsv1.Deployment{}, ravenProxyDNS); err != nil || !ok {
				return fmt.Errorf("--profile raven: no Deployment %s/%s (apply Raven's config/setup/raven-proxy-dns.yaml first, as its L7 proxy docs say): %v",
					tunnelnodes.Namespace, ravenProxyDNS, err)
			}
			return nil
		},
		rules: func(ctx context.Context, env *Env, tunnelIP netip.Addr) (tunnelnodes.Rules, error) {
			cfg := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, key(tunnelnodes.RavenGlobalConfigName), cfg); client.IgnoreNotFound(err) != nil {
				return nil, err
			}
			return tunnelnodes.RavenRules(tunnelnodes.RavenProxyEnabled(cfg.Data), tunnelIP), nil
		},
		proxiesCloudNodes: true,
	},
}

// profileNamed looks --profile's value up ("" is the default).
func profileNamed(name string) (profile, error) {
	if name == "" {
		return profiles[0], nil
	}
	for _, p := range profiles {
		if p.name == name {
			return p, nil
		}
	}
	return profile{}, fmt.Errorf("--profile %q: must be one of %s", name, strings.Join(ProfileNames(), ", "))
}

// ProfileNames lists --profile's values, the default first.
func ProfileNames() []string {
	var names []string
	for _, p := range profiles {
		names = append(names, p.name)
	}
	return names
}

// ProfileHelp describes --profile: each layout and its steps.
func ProfileHelp() string {
	var parts []string
	for _, p := range profiles {
		parts = append(parts, fmt.Sprintf("%s (%s; steps: %s)", p.name, p.help, strings.Join(names(p.steps()), ",")))
	}
	return "The tunnel layout: " + strings.Join(parts, " or ") + "; then " + OptInSteps
}

// allSteps are the layout's steps and then the optional ones every layout
// has (node-local-dns), in order; revert runs them backwards.
func (p profile) allSteps() []Step {
	return append(p.steps(), nodeLocalDNSStep(p))
}

// stepNames are the names of allSteps.
func (p profile) stepNames() []string { return names(p.allSteps()) }

func names(steps []Step) []string {
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	return names
}

// ProfileStepNames lists the steps install runs under the profile without
// an opt-in flag (nil for an unknown profile); OptInSteps follow them.
func ProfileStepNames(name string) []string {
	p, err := profileNamed(name)
	if err != nil {
		return nil
	}
	return names(p.steps())
}

// OptInSteps describes the steps every profile runs last when asked to.
const OptInSteps = nodeLocalDNS + " (with --node-local-dns)"

// checkProfile refuses to revert or report a state that install wrote under
// another profile: its steps would be skipped as "not applied".
func (s *state) checkProfile(p profile) error {
	mine := p.stepNames()
	for name := range s.steps {
		if slices.Contains(mine, name) {
			continue
		}
		for _, other := range profiles {
			if slices.Contains(other.stepNames(), name) {
				return fmt.Errorf("the install state holds step %s of --profile %s: run with --profile %s", name, other.name, other.name)
			}
		}
	}
	return nil
}

// preflight refuses a profile whose objects the cluster lacks (and hints at
// another profile when the cluster looks like it).
func preflight(ctx context.Context, env *Env, p profile, out io.Writer) error {
	return p.check(func(obj client.Object, name string) (bool, error) {
		err := env.Client.Get(ctx, key(name), obj)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}, out)
}

// profileRules are the profile's rules for the cluster as it is now, for
// --verify-dns.
func profileRules(ctx context.Context, env *Env, p profile) (tunnelnodes.Rules, error) {
	svc := &corev1.Service{}
	if err := env.Client.Get(ctx, key(p.sync.Service), svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		svc = nil
	}
	return p.rules(ctx, env, tunnelnodes.TunnelClusterIP(svc))
}

// reads are what the profile's rules get: the tunnel Service and, if the
// layout has one, its config ConfigMap (for --verify-dns's Jobs).
func (p profile) reads() []rbacv1.PolicyRule {
	read := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{p.sync.Service}, Verbs: []string{"get"}}}
	if p.sync.RavenConfig != "" {
		read = append(read, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{p.sync.RavenConfig}, Verbs: []string{"get"}})
	}
	return read
}

// loadProfileState is loadState for --profile's steps.
func loadProfileState(ctx context.Context, env *Env) (*state, profile, error) {
	p, err := profileNamed(env.Options.Profile)
	if err != nil {
		return nil, p, err
	}
	st, err := loadState(ctx, env)
	if err != nil {
		return nil, p, err
	}
	return st, p, st.checkProfile(p)
}
