package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/yurtdns/yurtdns/internal/image"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProbeImage is test/probe's image: an exporter, a fetcher and a DNS
// watcher, the tests' workload at both ends of the tunnel.
const ProbeImage = "docker.io/yurtdns/probe:test"

// ImportProbe builds test/probe of the module at repoRoot into an image and
// imports it on every node.
func (c *Cluster) ImportProbe(repoRoot string) error {
	bin := filepath.Join(c.dir, "probe")
	if _, err := os.Stat(bin); err == nil {
		return nil // imported by an earlier test
	}
	build := exec.Command("go", "build", "-trimpath", "-o", bin+".new", "./test/probe")
	build.Dir, build.Env = repoRoot, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building test/probe: %v\n%s", err, out)
	}
	img, err := image.Build(image.Spec{Binary: bin + ".new", Entrypoint: "/probe", CACertificates: "/etc/ssl/certs/ca-certificates.crt"})
	if err != nil {
		return err
	}
	archive := bin + ".oci.tar"
	if err := image.WriteOCIArchive(archive, ProbeImage, img); err != nil {
		return err
	}
	if err := c.importImages(archive); err != nil {
		return err
	}
	return os.Rename(bin+".new", bin)
}

// ProbePod is a kube-system pod running the probe image with args on node
// (hostNetwork for a node's server, the pod network for a client).
func ProbePod(name, node string, hostNetwork bool, labels map[string]string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: node, HostNetwork: hostNetwork, RestartPolicy: corev1.RestartPolicyNever,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: name, Image: ProbeImage, ImagePullPolicy: corev1.PullNever, Args: args}},
		},
	}
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
