package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/internal/image"
)

// kubeadmImages writes an image archive for every image kubeadm expects
// (`kubeadm config images list`) at the cluster's start version and, when
// that is older, at KubernetesVersion, which `kubeadm upgrade apply` expects
// on the nodes (nothing can be pulled here). They are written from the
// binaries hack/tools built, with the project's own image code. sandbox is
// the start version's pause image.
func (c *Cluster) kubeadmImages(initConfig string) (archives []string, sandbox string, err error) {
	configs := map[string]string{c.startVersion: initConfig}
	versions := []string{c.startVersion}
	if c.startVersion != KubernetesVersion {
		if configs[KubernetesVersion], err = upgradeConfig(initConfig, KubernetesVersion); err != nil {
			return nil, "", err
		}
		versions = append(versions, KubernetesVersion)
	}
	seen := map[string]bool{}
	for _, version := range versions {
		out, err := exec.Command(c.Kubeadm(version), "config", "images", "list", "--config", configs[version]).CombinedOutput()
		if err != nil {
			return nil, "", fmt.Errorf("kubeadm %s config images list: %v: %s", version, err, out)
		}
		for _, ref := range strings.Fields(string(out)) {
			if seen[ref] {
				continue
			}
			seen[ref] = true
			name := path.Base(ref[:strings.LastIndexByte(ref, ':')])
			spec, err := c.imageSpec(name, version)
			if err != nil {
				return nil, "", fmt.Errorf("image %s: %w", ref, err)
			}
			if name == "pause" && sandbox == "" {
				sandbox = ref
			}
			archive, err := c.imageArchive(ref, spec)
			if err != nil {
				return nil, "", err
			}
			archives = append(archives, archive)
		}
	}
	return archives, sandbox, nil
}

var kubernetesVersionLine = regexp.MustCompile(`(?m)^kubernetesVersion: .*$`)

// upgradeConfig writes initConfig at another Kubernetes version: the
// ClusterConfiguration `kubeadm upgrade apply <version>` works from.
func upgradeConfig(initConfig, version string) (string, error) {
	data, err := os.ReadFile(initConfig)
	if err != nil {
		return "", err
	}
	upgrade := strings.TrimSuffix(initConfig, ".yaml") + "-" + version + ".yaml"
	return upgrade, os.WriteFile(upgrade, kubernetesVersionLine.ReplaceAll(data, []byte("kubernetesVersion: "+version)), 0o644)
}

// importImages imports archives on every node at once, as the cluster's
// start imports its images, and keeps them with those for a node brought up
// later (AddSpareNode). An archive imported before is not imported again.
func (c *Cluster) importImages(archives ...string) error {
	var fresh []string
	for _, a := range archives {
		if !slices.Contains(c.images, a) {
			fresh = append(fresh, a)
		}
	}
	errs := make(chan error, len(c.Nodes))
	for _, n := range c.Nodes {
		go func() { errs <- n.ImportImages(fresh...) }()
	}
	var err error
	for range c.Nodes {
		err = errors.Join(err, <-errs)
	}
	if err == nil {
		c.images = append(c.images, fresh...)
	}
	return err
}

// imageArchive writes an OCI archive of spec's image as ref in the cache,
// named after ref so that two versions of an image never share one; an
// archive newer than its binary is reused.
func (c *Cluster) imageArchive(ref string, spec image.Spec) (string, error) {
	dir := filepath.Join(c.cacheDir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	archive := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".oci.tar")
	if newer(archive, spec.Binary) {
		return archive, nil
	}
	img, err := image.Build(spec)
	if err == nil {
		err = image.WriteOCIArchive(archive, ref, img)
	}
	if err != nil {
		return "", fmt.Errorf("image %s: %w", ref, err)
	}
	return archive, nil
}

func newer(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && sa.ModTime().After(sb.ModTime())
}

// imageSpec is the image of one kubeadm component at a Kubernetes version:
// its binary where the upstream image has it, run as root like the
// upstream images. The control plane and kube-proxy are that version's;
// etcd, pause and CoreDNS are Bin's, whatever tag kubeadm gives them.
func (c *Cluster) imageSpec(name, version string) (image.Spec, error) {
	spec := image.Spec{User: "0:0", CACertificates: "/etc/ssl/certs/ca-certificates.crt"}
	switch name {
	case "kube-apiserver", "kube-controller-manager", "kube-scheduler":
		spec.Binary, spec.Entrypoint = c.versionBin(version, name), "/usr/local/bin/"+name
	case "etcd":
		spec.Binary, spec.Entrypoint = c.bin(name), "/usr/local/bin/"+name
	case "kube-proxy":
		spec.Binary, spec.Entrypoint = c.versionBin(version, name), "/usr/local/bin/"+name
		files, err := iptablesFiles()
		if err != nil {
			return spec, err
		}
		spec.Files = files
	case "pause":
		spec.Binary, spec.Entrypoint = c.bin(name), "/pause"
		spec.User = "65535:65535"
	case "coredns":
		// As upstream's image: non-root, the binary may bind port 53.
		spec.Binary, spec.Entrypoint = c.bin(name), "/coredns"
		spec.User, spec.BindLowPorts = image.NonRoot, true
	default:
		return spec, fmt.Errorf("no binary for it")
	}
	return spec, nil
}

// iptablesFiles are Debian's iptables (nft and legacy) and conntrack with
// every library they and the xtables extensions load: kube-proxy's iptables
// mode runs them, and the upstream image carries them the same way.
func iptablesFiles() ([]image.File, error) {
	var files []image.File
	add := func(bin string) error {
		files = append(files, image.File{Path: bin, Source: bin})
		libs, err := sharedLibraries(bin)
		for _, l := range libs {
			files = append(files, image.File{Path: l, Source: l})
		}
		return err
	}
	for _, b := range []string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/xtables-legacy-multi", "/usr/sbin/conntrack"} {
		if err := add(b); err != nil {
			return nil, fmt.Errorf("%v (kube-proxy's image needs Debian's iptables and conntrack)", err)
		}
	}
	exts, _ := filepath.Glob("/usr/lib/x86_64-linux-gnu/xtables/*.so")
	for _, e := range exts {
		if err := add(e); err != nil {
			return nil, err
		}
	}
	for _, t := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		nft, legacy := strings.Replace(t, "tables", "tables-nft", 1), strings.Replace(t, "tables", "tables-legacy", 1)
		files = append(files,
			image.File{Path: "/usr/sbin/" + t, Link: "xtables-nft-multi"},
			image.File{Path: "/usr/sbin/" + nft, Link: "xtables-nft-multi"},
			image.File{Path: "/usr/sbin/" + legacy, Link: "xtables-legacy-multi"})
	}
	return files, nil
}

var lddPath = regexp.MustCompile(`(/\S+) \(0x`)

// sharedLibraries lists the libraries ldd resolves for a binary.
func sharedLibraries(bin string) ([]string, error) {
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %v: %s", bin, err, out)
	}
	var libs []string
	for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
		libs = append(libs, m[1])
	}
	return libs, nil
}
