// Package install is the cluster surgery of `tunnel-nodes-sync install`,
// `revert` and `status`: named, ordered, idempotent, reversible steps, in the
// manner of kubeadm's init phases.
//
// Each step has its own file, in the order install runs them:
//
//	records.go           records            Namespace yurtdns-records for the records' shards, its Roles
//	rbac.go              rbac               CoreDNS may read the records ConfigMap and the tunnel Service
//	corefile.go          corefile           ConfigMap coredns-yurt: the stock Corefile with yurthosts
//	corednsdaemonset.go  coredns-daemonset  CoreDNS as a DaemonSet, then the Deployment scaled to 0
//	kubednstopology.go   kube-dns-topology  kube-dns answers within the node pool
//	kubeproxy.go         kube-proxy         in-cluster config (where yurthub serves it), rolling restart
//	controlplane.go      control-plane      static pod manifests, locally or by Jobs (controlplanejobs.go)
//	sync.go              sync               the tunnel-nodes-sync Deployment from deploy/
//	prometheus.go        prometheus         Prometheus scrapes kubelets and node-exporters by node name
//
// With --node-local-dns, after either profile's steps (its Jobs in
// nodelocaldnsjobs.go, the node side in internal/nodelocal):
//
//	nodelocaldns.go      node-local-dns     a coredns-yurt cache per node at 169.254.20.10, kubelets pointed there
//
// Under --profile raven (profile.go: which steps, the layout checks) the
// steps are instead:
//
//	records.go           records            as above
//	ravenrbac.go         raven-rbac         raven-proxy-dns may read edge-tunnel-nodes and the proxy Service
//	ravencorefile.go     raven-corefile     ConfigMap raven-proxy-dns-yurt: its Corefile with yurthosts
//	ravenproxydns.go     raven-proxy-dns    the raven-proxy-dns Deployment runs coredns-yurt, in place
//	gatewaydns.go        gateway-dns        yurt-manager's gateway-dns controller off (--controllers)
//	sync.go              raven-sync         the sync from deploy/raven/tunnel-nodes-sync (--profile raven)
//
// The steps are built from shared parts: objectsStep and ensureCreated
// (objects.go) create objects and delete them on revert; fieldEdit and
// fieldStep (fieldedit.go) change one value and restore it; every "until
// live" wait goes through waitFor (wait.go); what each step changed is
// recorded, before it writes, in the state ConfigMap (state.go), so that
// revert restores exactly that and an interrupted run carries on. The
// DaemonSet is built from the Deployment in daemonset.go, with the security
// settings of securitycontext.go; the static pod manifests are edited in
// manifests.go and written in manifestfiles.go, and waited for in
// staticpods.go.
package install
