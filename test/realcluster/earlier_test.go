package realcluster

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/yurtdns/yurtdns/test/harness"
)

// earlierCommit is yurtdns from before v0.1.0 and before the node-local
// Corefile answered the cluster's zones itself (628bd26), so that the
// self-upgrade moves real content, not only images.
const earlierCommit = "7080c21"

// earlierYurtdns is earlierCommit's tunnel-nodes-sync and its two images.
type earlierYurtdns struct {
	bin                     string
	archives                []string
	coreDNSImage, syncImage string
}

// earlier is built by TestMain beside the cluster's start.
var earlier = make(chan earlierResult, 1)

type earlierResult struct {
	earlierYurtdns
	err error
}

// buildEarlier builds earlierCommit's binaries and, with today's
// hack/image, their images for this machine's platform into dir.
func buildEarlier(root, dir string) (earlierYurtdns, error) {
	bins, err := harness.BuildAt(earlierCommit, dir, "tunnel-nodes-sync", "coredns-yurt")
	if err != nil {
		return earlierYurtdns{}, err
	}
	e := earlierYurtdns{bin: bins[0],
		syncImage:    "docker.io/yurtdns/tunnel-nodes-sync:" + earlierCommit,
		coreDNSImage: "docker.io/yurtdns/coredns-yurt:" + earlierCommit}
	for _, img := range []struct {
		bin, ref string
		args     []string
	}{
		{bins[0], e.syncImage, []string{"--entrypoint", "/tunnel-nodes-sync", "--ports", "8080/tcp,8081/tcp"}},
		{bins[1], e.coreDNSImage, []string{"--entrypoint", "/coredns", "--bind-low-ports", "--ports", "53/udp,53/tcp,9153/tcp"}},
	} {
		out := filepath.Join(dir, filepath.Base(img.bin)+".oci.tar")
		cmd := exec.Command("go", append([]string{"run", "./hack/image", "--binary", "linux/" + runtime.GOARCH + "=" + img.bin,
			"--ref", img.ref, "--out", out}, img.args...)...)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return earlierYurtdns{}, fmt.Errorf("image %s: %v\n%s", img.ref, err, msg)
		}
		e.archives = append(e.archives, out)
	}
	return e, nil
}

// earlierOnNodes is the earlier build, its images imported on every node.
func earlierOnNodes(t *testing.T) earlierYurtdns {
	t.Helper()
	r := <-earlier
	earlier <- r
	if r.err != nil {
		t.Fatalf("yurtdns at %s: %v", earlierCommit, r.err)
	}
	for _, n := range kc.Nodes {
		if err := n.ImportImages(r.archives...); err != nil {
			t.Fatal(err)
		}
	}
	return r.earlierYurtdns
}
