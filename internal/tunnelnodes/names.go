// Package tunnelnodes is the contract shared by coredns-yurt and
// tunnel-nodes-sync: object names and keys, labels and annotations, and the
// hosts-format codec of the records ConfigMap. Nothing else defines these.
package tunnelnodes

const (
	// Namespace holds the tunnel server, its Service and the records ConfigMap.
	Namespace = "kube-system"
	// ConfigMapName is the records ConfigMap written by the sync and read by yurthosts.
	ConfigMapName = "yurt-tunnel-nodes"
	// ConfigMapKey is the key of the records ConfigMap that holds the hosts text.
	ConfigMapKey = "tunnel-nodes"
	// ServiceName is the tunnel server's internal Service; edge node names resolve to its ClusterIP.
	ServiceName = "x-tunnel-server-internal-svc"
	// ServerConfigName is the tunnel server's ConfigMap that lists the extra proxied ports.
	ServerConfigName = "yurt-tunnel-server-cfg"

	// RavenConfigMapName and RavenServiceName are the same objects under
	// Raven, OpenYurt's other cloud-edge tunnel.
	RavenConfigMapName = "edge-tunnel-nodes"
	RavenServiceName   = "x-raven-proxy-internal-svc"
	// RavenProxyDNSName is Raven's DNS Deployment (and its ServiceAccount
	// and Service), where the apiserver resolves node names under Raven.
	RavenProxyDNSName = "raven-proxy-dns"

	// CoreDNSName is kubeadm's CoreDNS Deployment, ConfigMap and
	// ServiceAccount.
	CoreDNSName = "coredns"
	// KubeDNSService is kubeadm's cluster DNS Service.
	KubeDNSService = "kube-dns"
	// TopologyKeysAnnotation on a Service makes OpenYurt's yurthub serve it
	// within the topology its value names (openyurt.io/nodepool: the node's
	// pool).
	TopologyKeysAnnotation = "openyurt.io/topologyKeys"

	// LeaderElectionID is the sync's leader Lease in Namespace (its
	// --leader-election-id default); revert deletes it.
	LeaderElectionID = "tunnel-nodes-sync"

	// EdgeNodeLabel marks an edge node (value "true").
	EdgeNodeLabel = "openyurt.io/is-edge-worker"

	// LastChangeTriggerTimeAnnotation is set by the sync on every write of the
	// records ConfigMap: the time (RFC 3339 nano) of the cluster change that
	// caused the write. yurthosts measures programming latency from it.
	LastChangeTriggerTimeAnnotation = "yurtdns.io/last-change-trigger-time"

	// TunnelClusterIPsAnnotation is set by the sync on every write of the
	// records ConfigMap: the tunnel Service ClusterIP(s) the text was rendered
	// for, comma-separated. yurthosts remaps exactly the entries at these
	// addresses to the Service's current ClusterIP(s), so every replica
	// answers alike without remembering past ClusterIPs.
	TunnelClusterIPsAnnotation = "yurtdns.io/tunnel-cluster-ips"

	// MaxHostsBytes bounds the hosts text: the apiserver rejects a ConfigMap
	// whose data exceeds 1 MiB, so neither side handles more.
	MaxHostsBytes = 1 << 20
)
