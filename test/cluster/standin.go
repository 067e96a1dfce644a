package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/image"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TunnelStandinImage is test/tunnelstandin's image: a stand-in for
// yurt-tunnel-server (forwarding by TLS SNI), a TLS exporter and a fetcher.
const TunnelStandinImage = "docker.io/yurtdns/tunnel-standin:test"

// TunnelStandinLabels are the stand-in server pod's labels; give the tunnel
// Service this selector to put the stand-in behind it.
var TunnelStandinLabels = map[string]string{"app": "tunnel-standin"}

// ImportTunnelStandin builds test/tunnelstandin of the module at repoRoot
// into an image, imports it on every node, and makes the server's
// ServiceAccount (get pods).
func (c *Cluster) ImportTunnelStandin(repoRoot string) error {
	bin := filepath.Join(c.dir, "tunnel-standin")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./test/tunnelstandin")
	build.Dir, build.Env = repoRoot, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the tunnel stand-in: %v\n%s", err, out)
	}
	img, err := image.Build(image.Spec{Binary: bin, Entrypoint: "/tunnel-standin", CACertificates: "/etc/ssl/certs/ca-certificates.crt"})
	if err != nil {
		return err
	}
	archive := bin + ".oci.tar"
	if err := image.WriteOCIArchive(archive, TunnelStandinImage, img); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := n.ImportImages(archive); err != nil {
			return err
		}
	}
	for _, cmd := range tunnelStandinRBAC() {
		// A benchmark before this one may have made them on the shared cluster.
		if out, err := c.Kubectl(context.Background(), strings.Fields(cmd)...); err != nil && !strings.Contains(out, "already exists") {
			return err
		}
	}
	return nil
}

// StandinPod is a kube-system pod running the stand-in image with args on
// node (hostNetwork for the servers, the pod network for a client).
func StandinPod(name, node string, hostNetwork bool, labels map[string]string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: node, HostNetwork: hostNetwork, RestartPolicy: corev1.RestartPolicyNever,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: name, Image: TunnelStandinImage, ImagePullPolicy: corev1.PullNever, Args: args}},
		},
	}
}

// TunnelStandinServer is the stand-in server's pod on master-1: it knows
// every node's address, and may get pods (the node of an exec request).
func (c *Cluster) TunnelStandinServer() *corev1.Pod {
	var nodes []string
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Name+"="+n.IP)
	}
	pod := StandinPod("tunnel-standin", c.Master().Name, true, TunnelStandinLabels, "serve", "--nodes", strings.Join(nodes, ","),
		// Where it terminates TLS it speaks to the kubelet as the apiserver does.
		"--kubelet-client-cert", "/pki/apiserver-kubelet-client.crt", "--kubelet-client-key", "/pki/apiserver-kubelet-client.key")
	pod.Spec.ServiceAccountName = "tunnel-standin"
	root := int64(0) // kubeadm's keys are root's
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &root}
	pod.Spec.Volumes = []corev1.Volume{{Name: "pki", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/kubernetes/pki"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "pki", MountPath: "/pki", ReadOnly: true}}
	return pod
}

// tunnelStandinRBAC lets the stand-in's ServiceAccount get pods.
func tunnelStandinRBAC() []string {
	return []string{
		"create serviceaccount tunnel-standin -n kube-system",
		"create clusterrole tunnel-standin --verb=get --resource=pods",
		"create clusterrolebinding tunnel-standin --clusterrole=tunnel-standin --serviceaccount=kube-system:tunnel-standin",
	}
}

// TunnelStandinStatsURL lists the connections the stand-in forwarded (JSON:
// node → port → count).
func (c *Cluster) TunnelStandinStatsURL() string {
	return "http://" + c.Master().IP + ":10265/connections"
}

// WaitPod polls a kube-system pod until done says so.
func (c *Cluster) WaitPod(ctx context.Context, name string, timeout time.Duration, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	cs, err := c.Clientset()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		p, err := cs.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err == nil && done(p) {
			return p, nil
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("pod %s not there after %s (%v)", name, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// PodReady is the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TunnelService is yurt-tunnel-server's internal Service as its chart makes
// it (10250 → 10263, 10255 → 10264), selecting the tunnel stand-in.
func TunnelService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: tunnelnodes.ServiceName, Namespace: tunnelnodes.Namespace},
		Spec: corev1.ServiceSpec{Selector: TunnelStandinLabels, Ports: []corev1.ServicePort{
			{Name: "https", Port: 10250, TargetPort: intstr.FromInt32(tunnelnodes.DefaultHTTPSTargetPort), Protocol: corev1.ProtocolTCP},
			{Name: "http", Port: 10255, TargetPort: intstr.FromInt32(tunnelnodes.DefaultHTTPTargetPort), Protocol: corev1.ProtocolTCP},
		}},
	}
}
