package layout

import (
	"fmt"
	"io"
	"net/netip"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The layouts yurtdns ships.
const (
	YurtTunnel = "yurt-tunnel"
	Raven      = "raven"
)

func init() {
	Register(Layout{
		Name: YurtTunnel, Help: "yurt-tunnel",
		RecordsConfigMap: tunnelnodes.ConfigMapName, Service: tunnelnodes.ServiceName, ServerConfig: tunnelnodes.ServerConfigName,
		Rules: func(_ map[string]string, tunnelIP netip.Addr) (tunnelnodes.Rules, bool) {
			return tunnelnodes.YurtTunnelRules(tunnelIP), tunnelIP.IsValid()
		},
		NeedsTunnel:       true,
		YurthostsOptions:  []string{ShardsOption},
		DNSServiceAccount: tunnelnodes.CoreDNSName,
		Preflight: func(exists func(client.Object, string) (bool, error), out io.Writer) error {
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
	})
	// Under Raven the apiserver resolves node names at raven-proxy-dns
	// (Raven's docs point it there), so that Deployment becomes coredns-yurt
	// in place; the cluster's own CoreDNS, kube-dns, kube-proxy and the
	// static pods are left as they are (see the README's profile table), and
	// the sync runs with Raven's rules once yurt-manager's gateway-dns
	// controller is off. Raven keeps its proxy Service's ports itself (from
	// its Gateways): the sync keeps only the records.
	Register(Layout{
		Name: Raven, Help: "Raven's L7 proxy",
		RecordsConfigMap: tunnelnodes.RavenConfigMapName, Service: tunnelnodes.RavenServiceName, Config: tunnelnodes.RavenGlobalConfigName,
		// As yurt-manager's gateway-dns controller has them: without the
		// proxy (or its ClusterIP) every node maps to its own address.
		Rules: func(config map[string]string, tunnelIP netip.Addr) (tunnelnodes.Rules, bool) {
			enabled := tunnelnodes.RavenProxyEnabled(config)
			return tunnelnodes.RavenRules(enabled, tunnelIP), enabled && tunnelIP.IsValid()
		},
		ProxiesCloudNodes: true,
		YurthostsOptions: []string{
			"configmap " + tunnelnodes.Namespace + "/" + tunnelnodes.RavenConfigMapName,
			"service " + tunnelnodes.Namespace + "/" + tunnelnodes.RavenServiceName,
			ShardsOption,
		},
		DNSServiceAccount: tunnelnodes.RavenProxyDNSName,
		Preflight: func(exists func(client.Object, string) (bool, error), _ io.Writer) error {
			if ok, err := exists(&corev1.ConfigMap{}, tunnelnodes.RavenGlobalConfigName); err != nil || !ok {
				return fmt.Errorf("--profile raven: no ConfigMap %s/%s, so this cluster does not run Raven (install Raven and its L7 proxy first, or use --profile yurt-tunnel): %v",
					tunnelnodes.Namespace, tunnelnodes.RavenGlobalConfigName, err)
			}
			if ok, err := exists(&appsv1.Deployment{}, tunnelnodes.RavenProxyDNSName); err != nil || !ok {
				return fmt.Errorf("--profile raven: no Deployment %s/%s (apply Raven's config/setup/raven-proxy-dns.yaml first, as its L7 proxy docs say): %v",
					tunnelnodes.Namespace, tunnelnodes.RavenProxyDNSName, err)
			}
			return nil
		},
	})
}
