package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// bootstrapToken lets worker nodes join; the cluster exists for one test run
// on an isolated network.
const bootstrapToken = "yurtdn.0123456789abcdef"

// certificateKey encrypts the control-plane certificates kubeadm init
// uploads for kubeadm join --control-plane (32 bytes, hex).
const certificateKey = "79757274646e732d746573742d636c75737465722d636572742d6b65792d3332"

// KubeadmPatchesDir is each node's kubeadm patches directory, in the node:
// `kubeadm upgrade apply` and `kubeadm upgrade node` rewrite the kubelet's
// config.yaml from the kubelet-config ConfigMap and must be given it
// (--patches) to keep the node's cgroupRoot. It lies in the node's
// /etc/kubernetes, with the rest of what kubeadm keeps.
const KubeadmPatchesDir = "/etc/kubernetes/patches"

const kubeadmInit = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: "{{token}}"
certificateKey: "{{certificateKey}}"
localAPIEndpoint:
  advertiseAddress: {{ip}}
  bindPort: 6443
nodeRegistration:
{{registration}}
patches:
  directory: {{patches}}
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: {{version}}
clusterName: yurtdns-test
controlPlaneEndpoint: {{endpoint}}
imageRepository: registry.k8s.io
# Stacked etcd on three members sharing two busy cores: a heartbeat every
# 250 ms and an election after 2.5 s without one, ten times etcd's 100 ms and
# 1 s (its tuning guide: the heartbeat near the round trip and disk write,
# the election ten times that), so a member starved for a second is not
# voted out.
etcd:
  local:
    extraArgs:
    - name: heartbeat-interval
      value: "250"
    - name: election-timeout
      value: "2500"
networking:
  podSubnet: {{podCIDR}},{{podCIDR6}}
  serviceSubnet: {{serviceCIDR}},{{serviceCIDR6}}
  dnsDomain: cluster.local
apiServer:
  certSANs: [{{lb}}, 127.0.0.1]
  # Behind a load balancer (kubernetes/kubeadm docs/ha-considerations.md):
  # a stopping apiserver fails /readyz at once but serves on for 5 s, so
  # haproxy (checking every second, out after two failures) takes it out
  # before it closes its port; the kubelet restarts each static pod so.
  # An audit log of the writes to kube-system's ConfigMaps: who writes the
  # records, and how often (ConfigMapWrites).
  extraArgs:
  - name: shutdown-delay-duration
    value: 5s
  - name: audit-policy-file
    value: /etc/kubernetes/audit-policy.yaml
  - name: audit-log-path
    value: /var/log/kubernetes/audit.log
  extraVolumes:
  - name: audit-policy
    hostPath: /etc/kubernetes/audit-policy.yaml
    mountPath: /etc/kubernetes/audit-policy.yaml
    readOnly: true
    pathType: File
  - name: audit-log
    hostPath: /var/log/kubernetes
    mountPath: /var/log/kubernetes
    pathType: DirectoryOrCreate
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
# The machine mounts cgroup v1.
failCgroupV1: false
failSwapOn: false
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: {{podCIDR}},{{podCIDR6}}
# nf_conntrack_max and the TCP timeouts are machine-wide: leave them alone.
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

const kubeadmJoin = `apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: {{endpoint}}
    token: "{{token}}"
    unsafeSkipCAVerification: true
nodeRegistration:
{{registration}}
{{controlPlane}}patches:
  directory: {{patches}}
`

const nodeRegistration = `  name: {{name}}
  criSocket: unix:///run/containerd/containerd.sock
  imagePullPolicy: Never
  # cgroups v1 support is deprecated: the one hard preflight error here.
  ignorePreflightErrors: [SystemVerification]
  taints: []
  kubeletExtraArgs:
  - name: node-ip
    value: {{ip}},{{ip6}}
{{labels}}`

// controlPlaneJoin makes a join a control-plane node's: its own apiserver
// and etcd member, with the certificates kubeadm init uploaded.
const controlPlaneJoin = `controlPlane:
  localAPIEndpoint:
    advertiseAddress: {{ip}}
    bindPort: 6443
  certificateKey: "{{certificateKey}}"
`

// auditPolicy logs who wrote which ConfigMap of kube-system, nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete]
  namespaces: [kube-system]
  resources:
  - group: ""
    resources: [configmaps]
- level: None
`

// kubeadmConfig writes node's kubeadm configuration (init for the first
// node, join for the others) and its kubelet patch, and returns its path.
func (c *Cluster) kubeadmConfig(n *Node) (string, error) { return c.kubeadmConfigAs(n, n.Name) }

// kubeadmConfigAs is kubeadmConfig registering the node as nodeName.
func (c *Cluster) kubeadmConfigAs(n *Node, nodeName string) (string, error) {
	patches := filepath.Join(n.StateDir("etc/kubernetes"), filepath.Base(KubeadmPatchesDir))
	if err := os.MkdirAll(patches, 0o755); err != nil {
		return "", err
	}
	// One cgroupRoot per node: two kubelets sharing one would remove each
	// other's pod cgroups as orphans.
	patch := fmt.Sprintf("cgroupRoot: /%s\n", n.cgroupName())
	if n.Edge {
		// Behind yurthub v1.7 the kubelet must list, not watch-list
		// (client-go's default since 1.35): yurthub answers a watch-list
		// from its cache with no objects, so a kubelet restarted while cut
		// off never syncs its Node and never starts a pod.
		patch += "featureGates:\n  WatchListClient: false\n"
	}
	if err := os.WriteFile(filepath.Join(patches, "kubeletconfiguration+merge.yaml"), []byte(patch), 0o644); err != nil {
		return "", err
	}
	// The labels yurtadm join gives (constructNodeLabels), set by the
	// kubelet at registration: yurt-manager's node webhook denies an admin
	// who changes openyurt.io/is-edge-worker later.
	labels := "  - name: node-labels\n    value: openyurt.io/is-edge-worker=false\n"
	if n.Edge {
		labels = "  - name: node-labels\n    value: openyurt.io/is-edge-worker=true," + NodePoolLabel + "=" + EdgePool + "\n"
	}
	tmpl := kubeadmJoin
	if n == c.Nodes[0] {
		tmpl = kubeadmInit
	}
	joinAs := ""
	if n.ControlPlane {
		joinAs = controlPlaneJoin
	}
	text := strings.NewReplacer("{{registration}}", nodeRegistration, "{{controlPlane}}", joinAs).Replace(tmpl)
	text = strings.NewReplacer(
		"{{certificateKey}}", certificateKey,
		"{{endpoint}}", loadBalancerIP+":6443",
		"{{lb}}", loadBalancerIP,
		"{{token}}", bootstrapToken,
		"{{ip6}}", n.IP6,
		"{{ip}}", n.IP,
		"{{name}}", nodeName,
		"{{labels}}", labels,
		"{{patches}}", KubeadmPatchesDir,
		"{{version}}", c.startVersion,
		"{{podCIDR6}}", podCIDR6,
		"{{podCIDR}}", podCIDR,
		"{{serviceCIDR6}}", serviceCIDR6,
		"{{serviceCIDR}}", serviceCIDR,
	).Replace(text)
	if n.ControlPlane {
		if err := os.WriteFile(filepath.Join(n.StateDir("etc/kubernetes"), "audit-policy.yaml"), []byte(auditPolicy), 0o644); err != nil {
			return "", err
		}
	}
	path := filepath.Join(n.dir, "kubeadm.yaml")
	return path, os.WriteFile(path, []byte(text), 0o644)
}
