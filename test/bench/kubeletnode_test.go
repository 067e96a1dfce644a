package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeletNodeImages is how many images a fleet node reports: the most a
// kubelet reports (--node-status-max-images), a node that has run a few
// dozen workloads.
const kubeletNodeImages = 50

// kubeletNodeTemplate is worker-1's Node as its kubelet wrote it on the real
// cluster (test/testdata/kubelet/node.json: `kubectl get node worker-1 -o
// json`, managedFields included): labels, annotations, conditions,
// nodeInfo, capacity, images.
func kubeletNodeTemplate(b testing.TB) *corev1.Node {
	b.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "test", "testdata", "kubelet", "node.json"))
	if err != nil {
		b.Fatal(err)
	}
	n := &corev1.Node{}
	if err := json.Unmarshal(data, n); err != nil {
		b.Fatal(err)
	}
	return n
}

// kubeletNode is fleet node i shaped as template: its own name, hostname
// label, addresses, machine IDs and pod CIDR, and kubeletNodeImages images,
// the template's first, then more of the same shape. Created as is (a Node
// may be created with its status, as the kubelet registers it).
func kubeletNode(template *corev1.Node, i int) *corev1.Node {
	n := template.DeepCopy()
	name := fleetNode(i)
	n.ObjectMeta = metav1.ObjectMeta{Name: name, Labels: n.Labels, Annotations: n.Annotations, ManagedFields: n.ManagedFields}
	n.Labels[corev1.LabelHostname] = name
	n.Labels[tunnelnodes.EdgeNodeLabel] = "true"
	n.Spec.PodCIDR = fmt.Sprintf("10.%d.%d.0/24", 200+i>>16, i>>8&255)
	n.Spec.PodCIDRs = []string{n.Spec.PodCIDR}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fleetIP(i)}, {Type: corev1.NodeHostName, Address: name}}
	id := func(what string) string {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s-%d", what, i))
		return hex.EncodeToString(sum[:16])
	}
	n.Status.NodeInfo.MachineID, n.Status.NodeInfo.SystemUUID, n.Status.NodeInfo.BootID = id("machine"), id("system"), id("boot")
	images := n.Status.Images
	for j := range images {
		// Imported here, they have a tag only; pulled from a registry, a digest too.
		if names := images[j].Names; len(names) == 1 {
			repo, _, _ := strings.Cut(names[0], ":")
			images[j].Names = []string{repo + "@sha256:" + digest(names[0]), names[0]}
		}
	}
	for j := len(images); j < kubeletNodeImages; j++ {
		repo := fmt.Sprintf("docker.io/team%d/service-%02d", j%7, j)
		images = append(images, corev1.ContainerImage{
			Names:     []string{repo + "@sha256:" + digest(repo), fmt.Sprintf("%s:v1.%d.%d", repo, j%5, j)},
			SizeBytes: int64(20_000_000 + j*1_234_567),
		})
	}
	n.Status.Images = images[:kubeletNodeImages]
	return n
}

// digest is a made-up image digest for name.
func digest(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}
