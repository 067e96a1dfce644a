// Package cluster runs a real two-node kubeadm cluster on this
// machine, for the tests that need what envtest lacks — a kubelet running
// pods, kube-proxy programming Services, the controllers, static pods
// restarted from their manifests — and for `make demo`.
//
// Each node lives in its own network namespace (joined to the others by a
// bridge on a documentation range that no route of the machine uses, with no
// default route: no packet leaves the machine) and its own mount namespace
// (tmpfs on /run, overlays on /etc, /var, /opt and /usr, the cluster's state
// bind-mounted from the cluster directory), with its own containerd and
// kubelet. master-1 comes from `kubeadm init` — kubeadm's static pods, its
// CoreDNS Deployment and Corefile, the kube-proxy DaemonSet, all unchanged —
// and worker-1 from `kubeadm join`, labelled as an OpenYurt edge node. The
// images are written from binaries that hack/tools builds (make test-tools)
// and imported into each node's containerd as kubeadm expects them.
//
// The cluster runs Kubernetes v1.37.1 (KubernetesVersion), or starts at an
// older version (Config.StartVersion: PreviousKubernetesVersion) with the
// images of both on every node, for a test to upgrade it as an operator would: `kubeadm upgrade
// apply` and `kubeadm upgrade node` with --patches KubeadmPatchesDir, then
// Node.UpgradeKubelet.
//
// Everything the cluster writes lives under one directory; every process is
// recorded and stopped by PID; the kernel settings a kubelet changes
// machine-wide are put back; a cluster left by a killed run is torn down by
// the next Start. The facts behind each step are in ../shared/real-cluster.md.
package cluster
