package cluster

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

//go:embed nodens.sh
var nodeNamespaceScript string

// Node is one machine of the cluster: a network and a mount namespace with
// its own containerd and kubelet.
type Node struct {
	Name string
	// IP and PodCIDR are the node's IPv4 ones, IP6 and PodCIDR6 its IPv6.
	IP, IP6           string
	PodCIDR, PodCIDR6 string
	// Edge nodes carry openyurt.io/is-edge-worker=true.
	Edge bool
	// ControlPlane nodes run kube-apiserver, etcd and the rest (kubeadm init
	// or join --control-plane).
	ControlPlane bool

	site  *site // nil on the cloud's network
	c     *Cluster
	short string // for interface names (15 bytes at most)
	// registeredAs is the node's name in the cluster when a JoinAs gave it
	// another one.
	registeredAs string
	netns        string
	dir          string
	anchor       *process
	// containerd and the node's upstream resolver, started once per
	// machine; Reboot restarts containerd.
	containerd, stubResolver *process

	kubelet service
	// kubeletStarts are the times StartKubelet started the kubelet.
	kubeletStartsMu sync.Mutex
	kubeletStarts   []time.Time
	// yurthub runs on edge nodes, as yurtadm join's systemd unit runs it.
	yurthub service

	// version is the Kubernetes version of the node's kubelet and kubeadm
	// (the packages installed on the machine); UpgradeKubelet moves it.
	versionMu sync.Mutex
	version   string
}

// Version is the Kubernetes version of the node's kubelet and kubeadm.
func (n *Node) Version() string {
	n.versionMu.Lock()
	defer n.versionMu.Unlock()
	return n.version
}

func (n *Node) setVersion(v string) {
	n.versionMu.Lock()
	defer n.versionMu.Unlock()
	n.version = v
}

// objectName is the node's Node object's name.
func (n *Node) objectName() string {
	if n.registeredAs != "" {
		return n.registeredAs
	}
	return n.Name
}

// cgroupName is the node's kubelet cgroupRoot, one per node so the two
// kubelets never manage each other's pods.
func (n *Node) cgroupName() string { return "yurtdns-" + n.Name }

// daemonsCPUCgroup is where the node's daemons take their CPU: beside the
// kubelet's kubepods under the node's cgroup, as system.slice sits beside
// kubepods.slice on a machine. So each node weighs the same on the
// machine's CPU whatever runs on it, as each is a machine of its own. In
// the machine's root cgroup every thread of theirs weighed as much as all of
// a node's pods: kubelets restarting on some nodes took the CPU from the
// pods of every node.
func (n *Node) daemonsCPUCgroup() string {
	return filepath.Join("/sys/fs/cgroup/cpu", n.cgroupName(), "daemons")
}

// startAnchor makes the node's mount namespace (see nodens.sh).
func (n *Node) startAnchor() error {
	script := filepath.Join(n.c.dir, "nodens.sh")
	if err := os.WriteFile(script, []byte(nodeNamespaceScript), 0o755); err != nil {
		return err
	}
	cmd := exec.Command("ip", "netns", "exec", n.netns, "bash", script, n.dir, n.Name, n.IP)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	logf, err := n.logFile("anchor")
	if err != nil {
		return err
	}
	cmd.Stderr = logf
	p, err := n.c.start("anchor-"+n.Name, cmd)
	if err != nil {
		return err
	}
	n.anchor = p
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("unexpected %q", line)
		}
		ready <- err
		io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-ready:
		if err != nil {
			return fmt.Errorf("node %s namespace: %v (see %s)", n.Name, err, logf.Name())
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("node %s namespace not ready after 30s (see %s)", n.Name, logf.Name())
	}
}

func (n *Node) logFile(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(n.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// Command runs name inside the node: its network and mount namespaces, as a
// process of the node would see the machine.
// The Kubernetes binaries of the node's version come first on its PATH
// (kubeadm runs kubelet --version), then Bin's (etcd, kubectl, ...).
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(n.anchor.pid), "-m", "-n", "--", name}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+n.c.versionDir(n.Version())+":"+n.c.binDir+":"+os.Getenv("PATH"))
	return cmd
}

// Run runs name inside the node and returns its combined output.
func (n *Node) Run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := n.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s on %s: %v: %s", name, n.Name, err, out)
	}
	return string(out), nil
}

// NetCommand runs name in the node's network namespace only: the machine's
// own files (dig and the like) with the node's network view.
func (n *Node) NetCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.netns, name}, args...)...)
}

// startDaemon starts one of the node's own daemons (containerd, yurthub,
// the kubelet) in the node's daemons cgroup; what it forks (containerd's
// shims) stays there.
func (n *Node) startDaemon(name string, args ...string) (*process, error) {
	p, err := n.startProcess(name, args...)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(n.daemonsCPUCgroup(), "cgroup.procs"), []byte(strconv.Itoa(p.pid)), 0o644); err != nil {
		p.stop(0)
		return nil, fmt.Errorf("moving %s of %s into its node's cgroup: %w", name, n.Name, err)
	}
	return p, nil
}

// startProcess starts a long-running program inside the node, logging to
// the node directory, recorded by PID.
func (n *Node) startProcess(name string, args ...string) (*process, error) {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(n.anchor.pid), "-m", "-n", "--"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := n.logFile(name)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	return n.c.start(name+"-"+n.Name, cmd)
}

const containerdConfig = `version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  netns_mounts_under_state_dir = true
  enable_selinux = false
  # This sandbox may not lower a process's OOM score: without this every pod
  # sandbox fails in runc ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    discard_unpacked_layers = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
`

const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "yurtdns",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "%s"}], [{"subnet": "%s"}]], "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// stubResolverCorefile is the node's upstream resolver (its resolv.conf
// names it): NXDOMAIN for every name, so nothing is forwarded off the machine.
const stubResolverCorefile = `.:53 {
    bind %s
    template ANY ANY {
        rcode NXDOMAIN
    }
}
`

// controlPlaneImages are kubeadm's images that only a control-plane node
// runs (in the archive names imageArchive gives them).
var controlPlaneImages = []string{"_kube-apiserver_", "_kube-controller-manager_", "_kube-scheduler_", "_etcd_"}

// imagesFor are the archives node n imports: a node that is not a
// control-plane node leaves out the control plane's.
func imagesFor(n *Node, archives []string) []string {
	if n.ControlPlane {
		return archives
	}
	return slices.DeleteFunc(slices.Clone(archives), func(a string) bool {
		return slices.ContainsFunc(controlPlaneImages, func(s string) bool { return strings.Contains(filepath.Base(a), s) })
	})
}

// startRuntime starts the node's stub resolver and containerd, and imports
// the images the node runs.
func (n *Node) startRuntime(images []string, sandboxImage string) error {
	corefile := filepath.Join(n.dir, "stub-resolver.Corefile")
	if err := os.WriteFile(corefile, []byte(fmt.Sprintf(stubResolverCorefile, n.IP)), 0o644); err != nil {
		return err
	}
	var err error
	// The machine's resolver, not the node's: it stays in the machine's
	// cgroup, and survives a reboot.
	if n.stubResolver, err = n.startProcess("stub-resolver", n.c.bin("coredns"), "-conf", corefile); err != nil {
		return err
	}
	cniDir := filepath.Join(n.dir, "state", "etc_cni_net.d")
	if err := os.MkdirAll(cniDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniDir, "10-yurtdns.conflist"), []byte(fmt.Sprintf(cniConfig, n.PodCIDR, n.PodCIDR6)), 0o644); err != nil {
		return err
	}
	config := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(containerdConfig, n.dir, sandboxImage)), 0o644); err != nil {
		return err
	}
	if err := n.startContainerd(); err != nil {
		return err
	}
	return n.ImportImages(imagesFor(n, images)...)
}

// startContainerd starts the node's containerd and waits until it answers.
func (n *Node) startContainerd() error {
	var err error
	if n.containerd, err = n.startDaemon("containerd", "containerd", "--config", filepath.Join(n.dir, "containerd.toml")); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err := n.Run(ctx, "ctr", "version"); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd on %s not answering after 30s (see %s)", n.Name, filepath.Join(n.dir, "containerd.log"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ImportImages imports image archives into the node's containerd exactly as
// the README tells a user: ctr -n k8s.io images import --all-platforms (the
// kubelet runs the node's own platform's image of the index).
func (n *Node) ImportImages(archives ...string) error {
	for _, a := range archives {
		if _, err := n.Run(context.Background(), "ctr", "-n", "k8s.io", "images", "import", "--all-platforms", a); err != nil {
			return err
		}
	}
	return nil
}

// service plays systemd's part for one daemon of a node: it starts it,
// restarts it when it exits, until stopped.
type service struct {
	start func() (*process, error)

	mu   sync.Mutex
	stop chan struct{}
	done chan struct{}
}

// Start starts the daemon under supervision (again after a Stop).
func (s *service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	s.stop, s.done = stop, done
	go func() {
		defer close(done)
		for {
			if p, err := s.start(); err == nil {
				select {
				case <-p.exited:
				case <-stop:
					p.stop(15 * time.Second)
					return
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}

// Stop stops the daemon and its supervision.
func (s *service) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.stop, s.done = nil, nil
}

// StartKubelet starts the node's kubelet once kubeadm has written its
// configuration, with the flags kubeadm wrote, and restarts it when it
// exits, until StopKubelet.
func (n *Node) StartKubelet() {
	n.kubeletStartsMu.Lock()
	n.kubeletStarts = append(n.kubeletStarts, time.Now())
	n.kubeletStartsMu.Unlock()
	n.kubelet.Start()
}

// KubeletStartedWithin reports whether StartKubelet started the node's
// kubelet in [at-before, at+after].
func (n *Node) KubeletStartedWithin(at time.Time, before, after time.Duration) bool {
	n.kubeletStartsMu.Lock()
	defer n.kubeletStartsMu.Unlock()
	return slices.ContainsFunc(n.kubeletStarts, func(s time.Time) bool {
		return !s.Before(at.Add(-before)) && !s.After(at.Add(after))
	})
}

// StopKubelet stops the kubelet (the node goes NotReady; its pods keep
// running, as on a machine whose kubelet died).
func (n *Node) StopKubelet() { n.kubelet.Stop() }

var errNoKubeletConfig = errors.New("kubeadm has not written the kubelet configuration yet")

func (n *Node) startKubeletOnce() (*process, error) {
	state := filepath.Join(n.dir, "state", "var_lib_kubelet")
	if _, err := os.Stat(filepath.Join(state, "config.yaml")); err != nil {
		return nil, errNoKubeletConfig
	}
	env, err := os.ReadFile(filepath.Join(state, "kubeadm-flags.env"))
	if err != nil {
		return nil, errNoKubeletConfig
	}
	args := []string{n.c.versionBin(n.Version(), "kubelet"), "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
		"--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml"}
	args = append(args, kubeadmFlags(string(env))...)
	return n.startDaemon("kubelet", args...)
}

// UpgradeKubelet moves the node's kubelet and kubeadm to KubernetesVersion
// as an operator does after `kubeadm upgrade apply` or `kubeadm upgrade
// node`: the new binaries in place, then `systemctl restart kubelet`. It
// waits until the Node reports that kubelet version and is Ready, and its
// static pods have settled: the new kubelet restarts those whose container
// hash it computes anew (kube-apiserver among them, whose RBAC then
// refuses the admin until its caches sync).
func (n *Node) UpgradeKubelet(ctx context.Context) error {
	n.StopKubelet()
	n.setVersion(KubernetesVersion)
	restarted := time.Now()
	n.StartKubelet()
	cs, err := n.c.Clientset()
	if err != nil {
		return err
	}
	err = n.c.retry(ctx, 3*time.Minute, fmt.Sprintf("Node %s Ready with kubelet %s", n.objectName(), KubernetesVersion), func() error {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.objectName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v := node.Status.NodeInfo.KubeletVersion; v != KubernetesVersion {
			return fmt.Errorf("kubelet %s", v)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				return fmt.Errorf("not Ready: %s", c.Message)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return n.waitStaticPodsSettled(ctx, cs, restarted)
}

// waitStaticPodsSettled waits until each of the node's static pods is Ready
// with its containers started since the kubelet restarted, or left running
// for 30 s (the kubelet syncs them as it starts); then until the admin is
// allowed to read Nodes again.
func (n *Node) waitStaticPodsSettled(ctx context.Context, cs kubernetes.Interface, restarted time.Time) error {
	err := n.c.retry(ctx, 3*time.Minute, "the static pods of "+n.Name+" settled under the new kubelet", func() error {
		pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.objectName()})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; !mirror {
				continue
			}
			if !PodReady(&p) {
				return fmt.Errorf("%s not Ready", p.Name)
			}
			for _, c := range p.Status.ContainerStatuses {
				if r := c.State.Running; r == nil || (r.StartedAt.Time.Before(restarted) && time.Since(restarted) < 30*time.Second) {
					return fmt.Errorf("%s not restarted yet", p.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return n.c.retry(ctx, time.Minute, "the admin allowed to get Nodes", func() error {
		_, err := cs.CoreV1().Nodes().Get(ctx, n.objectName(), metav1.GetOptions{})
		return err
	})
}

// kubeadmFlags reads KUBELET_KUBEADM_ARGS="..." from kubeadm-flags.env.
func kubeadmFlags(env string) []string {
	for _, line := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "KUBELET_KUBEADM_ARGS="); ok {
			return strings.Fields(strings.Trim(v, `"`))
		}
	}
	return nil
}

// StateDir is where the node's dir (etc/kubernetes, var/lib/kubelet, ...)
// lives on the machine.
func (n *Node) StateDir(dir string) string {
	return filepath.Join(n.dir, "state", strings.ReplaceAll(strings.Trim(dir, "/"), "/", "_"))
}

// ContainerPID finds the process of a hostNetwork container (a static pod's)
// on the node by its program name.
func (n *Node) ContainerPID(program string) (int, error) {
	for _, pid := range pidsInNetns(n.netns) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if filepath.Base(argv0) == program {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process on %s", program, n.Name)
}

// ProcessOfContainer finds a container's process on the node: runc puts it
// in a cgroup named after the container ID, under the kubelet's cgroupRoot.
func (n *Node) ProcessOfContainer(id string) (int, error) {
	var found []int
	filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", n.cgroupName()), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && filepath.Base(p) == id {
			found = pidsInCgroup(p)
		}
		return nil
	})
	if len(found) == 0 {
		return 0, fmt.Errorf("no process of container %s on %s", id, n.Name)
	}
	return found[0], nil
}

// Netns is the node's network namespace (ip netns exec NETNS ...).
func (n *Node) Netns() string { return n.netns }

// PodLogs reads what the containers of a pod on the node have logged, from
// the kubelet's log files (/var/log/pods), without the apiserver.
func (n *Node) PodLogs(namespace, pod string) (string, error) {
	dirs, _ := filepath.Glob(n.podLogDir(namespace, pod))
	if len(dirs) == 0 {
		return "", fmt.Errorf("no logs of pod %s/%s on %s", namespace, pod, n.Name)
	}
	files, _ := filepath.Glob(filepath.Join(dirs[0], "*", "*.log"))
	var logs strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		logs.Write(data)
	}
	return logs.String(), nil
}

// podLogDir is the glob of the kubelet's log directory of the pod (named
// with its UID).
func (n *Node) podLogDir(namespace, pod string) string {
	return filepath.Join(n.StateDir("var/log/pods"), namespace+"_"+pod+"_*")
}

// ContainerLog is what the kubelet logged of the container's attempt-th run
// (0 the first) in the pod, from the node's log files.
func (n *Node) ContainerLog(namespace, pod, container string, attempt int32) (string, error) {
	files, _ := filepath.Glob(filepath.Join(n.podLogDir(namespace, pod), container, fmt.Sprintf("%d.log", attempt)))
	if len(files) == 0 {
		return "", fmt.Errorf("no log of run %d of %s in pod %s/%s on %s", attempt, container, namespace, pod, n.Name)
	}
	data, err := os.ReadFile(files[0])
	return string(data), err
}

// StaticPodManifestContains reports whether the node's static pod manifest
// of component contains s.
func (n *Node) StaticPodManifestContains(component, s string) bool {
	data, _ := os.ReadFile(filepath.Join(n.StateDir("etc/kubernetes"), "manifests", component+".yaml"))
	return strings.Contains(string(data), s)
}
