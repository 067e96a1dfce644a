// Package steps holds install's steps, one file each; plan.go is the only
// ordered list of them per layout, and of the opt-in steps every layout
// runs last. Under --profile yurt-tunnel:
//
//	records.go           records            Namespace yurtdns-records for the records' shards, its Roles
//	rbac.go              rbac               CoreDNS may read the records ConfigMap and the tunnel Service
//	corefile.go          corefile           ConfigMap coredns-yurt: the stock Corefile with yurthosts
//	corednsdaemonset.go  coredns-daemonset  CoreDNS as a DaemonSet, then the Deployment scaled to 0
//	kubednstopology.go   kube-dns-topology  kube-dns answers within the node pool
//	kubeproxy.go         kube-proxy         in-cluster config (where yurthub serves it), rolling restart
//	controlplane.go      control-plane      static pod manifests, locally or by Jobs (controlplanejobs.go)
//	tunneldns.go         tunnel-dns         yurt-tunnel-server's DNS controller off (--enable-dns-controller=false)
//	sync.go              sync               the tunnel-nodes-sync Deployment from deploy/
//	prometheus.go        prometheus         Prometheus scrapes kubelets and node-exporters by node name
//	monitoring.go        monitoring         PodMonitors and alerts of deploy/monitoring, where prometheus-operator is
//
// Under --profile raven:
//
//	records.go           records            as above
//	rbac.go              raven-rbac         raven-proxy-dns may read edge-tunnel-nodes and the proxy Service
//	ravencorefile.go     raven-corefile     ConfigMap raven-proxy-dns-yurt: its Corefile with yurthosts
//	ravenproxydns.go     raven-proxy-dns    the raven-proxy-dns Deployment runs coredns-yurt, in place
//	gatewaydns.go        gateway-dns        yurt-manager's gateway-dns controller off (--controllers)
//	sync.go              raven-sync         the sync from deploy/raven/tunnel-nodes-sync
//
// Then, with --node-local-dns (its Jobs in nodelocaldnsjobs.go, the node
// side in internal/nodelocal):
//
//	nodelocaldns.go      node-local-dns     a coredns-yurt cache per node at 169.254.20.10, kubelets pointed there
//
// Two builders make most steps: objectsStep (objectsstep.go) creates a
// fixed set of objects and deletes them on revert; fieldStep (fieldstep.go)
// changes one value and restores it, and deploymentFlagStep
// (deploymentflag.go) makes it one flag of a Deployment's container, waiting
// for the rollout (gateway-dns, tunnel-dns). The DaemonSet is built from the
// Deployment in daemonset.go.
package steps
