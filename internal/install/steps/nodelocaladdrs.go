package steps

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/nodelocal"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeDNSUpstream is the Service the node-local caches forward to; its IP
// families (PreferDualStack: both on a dual-stack cluster, the primary
// first) decide the caches' addresses.
const kubeDNSUpstream = "kube-dns-upstream"

// nodeLocalFamilies are the IP families of kube-dns-upstream as install
// leaves it: the live Service's once this version applied it
// (PreferDualStack), else what a dry-run apply of svc (deploy/'s) would
// make of it (the live Service's families when that is forbidden: status
// run with a role that only reads). IPv4 when none names a family (a
// client that allocates nothing).
func nodeLocalFamilies(ctx context.Context, env *engine.Env, svc *unstructured.Unstructured) ([]corev1.IPFamily, error) {
	live := &corev1.Service{}
	err := env.Client.Get(ctx, kube.Key(kubeDNSUpstream), live)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading Service %s: %w", kubeDNSUpstream, err)
	}
	want, _, _ := unstructured.NestedString(svc.Object, "spec", "ipFamilyPolicy")
	if err == nil && len(live.Spec.IPFamilies) > 0 && (live.Spec.IPFamilyPolicy != nil && string(*live.Spec.IPFamilyPolicy) == want) {
		return live.Spec.IPFamilies, nil
	}
	probe := svc.DeepCopy()
	kube.LabelManaged(probe)
	if probe.GetNamespace() == "" {
		probe.SetNamespace(tunnelnodes.Namespace)
	}
	applyErr := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(probe), client.FieldOwner(kube.FieldManager), client.ForceOwnership, client.DryRunAll)
	switch {
	case apierrors.IsForbidden(applyErr):
		// status with a role that only reads: the live Service's families
		// (an install with it would fail at the Service's apply anyway).
		probe = &unstructured.Unstructured{Object: map[string]any{}}
	case applyErr != nil:
		return nil, fmt.Errorf("applying Service %s (dry run, for its IP families): %w", kubeDNSUpstream, applyErr)
	}
	got := &corev1.Service{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(probe.Object, got); err != nil {
		return nil, err
	}
	if len(got.Spec.IPFamilies) > 0 {
		return got.Spec.IPFamilies, nil
	}
	if err == nil && len(live.Spec.IPFamilies) > 0 {
		return live.Spec.IPFamilies, nil
	}
	return []corev1.IPFamily{corev1.IPv4Protocol}, nil
}

// addrList is the node-local addresses as install prints them
// ("169.254.20.10", "169.254.20.10,fd84:5bd1:ae3::10").
func addrList(addrs []netip.Addr) string {
	return strings.Join(nodelocal.Strings(addrs), ",")
}

// onlyDefault: the addresses are the IPv4 one alone, deploy/'s as it is.
func onlyDefault(addrs []netip.Addr) bool {
	return len(addrs) == 1 && addrs[0] == nodelocal.Address
}

// recordedAddresses are the node-local addresses a node was set up with
// (a record of an earlier install has none: the IPv4 one).
func recordedAddresses(r *engine.KubeletRecord) []netip.Addr {
	if r == nil || len(r.Addresses) == 0 {
		return []netip.Addr{nodelocal.Address}
	}
	var addrs []netip.Addr
	for _, s := range r.Addresses {
		if a, err := netip.ParseAddr(s); err == nil {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return []netip.Addr{nodelocal.Address}
	}
	return addrs
}

// unionAddresses are the addresses of all of lists, each once, in the order
// they first come.
func unionAddresses(lists ...[]netip.Addr) []netip.Addr {
	var all []netip.Addr
	for _, l := range lists {
		for _, a := range l {
			if !slices.Contains(all, a) {
				all = append(all, a)
			}
		}
	}
	return all
}

var defaultHostPort = regexp.MustCompile(regexp.QuoteMeta(nodelocal.Address.String()) + `:([0-9]+)`)

// corefileAddresses makes deploy/'s Corefile (written for 169.254.20.10)
// bind addrs, with health and ready on the first of them.
func corefileAddresses(corefile string, addrs []netip.Addr) string {
	if onlyDefault(addrs) || len(addrs) == 0 {
		return corefile
	}
	corefile = strings.ReplaceAll(corefile, "bind "+nodelocal.Address.String()+"\n", "bind "+strings.Join(nodelocal.Strings(addrs), " ")+"\n")
	return defaultHostPort.ReplaceAllStringFunc(corefile, func(hp string) string {
		return net.JoinHostPort(addrs[0].String(), defaultHostPort.FindStringSubmatch(hp)[1])
	})
}

// daemonSetAddresses makes a DaemonSet pod spec of deploy/ (written for
// 169.254.20.10) use addrs: one --address per address in its containers'
// args, its probes on the first.
func daemonSetAddresses(spec map[string]any, addrs []netip.Addr) {
	if onlyDefault(addrs) || len(addrs) == 0 {
		return
	}
	for _, field := range []string{"initContainers", "containers"} {
		containers, _ := spec[field].([]any)
		for _, c := range containers {
			cm := c.(map[string]any)
			if args, ok := cm["args"].([]any); ok {
				var next []any
				for i := 0; i < len(args); i++ {
					if args[i] == "--address" && i+1 < len(args) && args[i+1] == nodelocal.Address.String() {
						for _, a := range addrs {
							next = append(next, "--address", a.String())
						}
						i++
						continue
					}
					next = append(next, args[i])
				}
				cm["args"] = next
			}
			for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
				if get, ok, _ := unstructured.NestedMap(cm, probe, "httpGet"); ok && get["host"] == nodelocal.Address.String() {
					get["host"] = addrs[0].String()
					_ = unstructured.SetNestedMap(cm, get, probe, "httpGet")
				}
			}
		}
	}
}

// daemonSetAddressesOf are the --address values of the setup init
// container of DaemonSet name (nil when it is not there).
func daemonSetAddressesOf(ctx context.Context, env *engine.Env, name string) ([]netip.Addr, error) {
	ds := &unstructured.Unstructured{}
	ds.SetAPIVersion("apps/v1")
	ds.SetKind("DaemonSet")
	if err := env.Client.Get(ctx, kube.Key(name), ds); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	inits, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "initContainers")
	var addrs []netip.Addr
	for _, c := range inits {
		args, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
		for i := 0; i+1 < len(args); i++ {
			if args[i] != "--address" {
				continue
			}
			for _, s := range strings.Split(args[i+1], ",") {
				if a, err := netip.ParseAddr(s); err == nil && !slices.Contains(addrs, a) {
					addrs = append(addrs, a)
				}
			}
		}
	}
	return addrs, nil
}

// nodeLocalAddrs are the caches' addresses for kube-dns-upstream's IP
// families (nodeLocalFamilies), the primary family's first.
func nodeLocalAddrs(ctx context.Context, env *engine.Env) ([]netip.Addr, error) {
	objs, err := deploy.Render(deploy.NodeLocalDNS)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GetName() == kubeDNSUpstream {
			families, err := nodeLocalFamilies(ctx, env, o)
			if err != nil {
				return nil, err
			}
			return nodelocal.Addresses(families), nil
		}
	}
	return nil, fmt.Errorf("deploy/%s has no Service %s", deploy.NodeLocalDNS, kubeDNSUpstream)
}

// setupAddresses are the addresses the caches of DaemonSet name were set
// up with, from its setup container's args; 169.254.20.10 when it is not
// there (or names none).
func setupAddresses(ctx context.Context, env *engine.Env, name string) ([]netip.Addr, error) {
	addrs, err := daemonSetAddressesOf(ctx, env, name)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		addrs = []netip.Addr{nodelocal.Address}
	}
	return addrs, nil
}

// recordAddresses is addrs as a KubeletRecord keeps them: none for the
// IPv4 address alone (as an earlier install recorded it).
func recordAddresses(addrs []netip.Addr) []string {
	if onlyDefault(addrs) {
		return nil
	}
	return nodelocal.Strings(addrs)
}
