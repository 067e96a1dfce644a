// Package image builds yurtdns's container images without a container
// engine (none runs here): one layer with the static binary, the CA
// certificates and a passwd entry for the non-root user, written as an OCI
// image layout in a tar file (`skopeo copy oci-archive:...`, `podman load`,
// `ctr images import` read it).
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user the images run as (distroless's "nonroot").
const NonRoot = "65532:65532"

// Spec describes one image.
type Spec struct {
	// Binary is the path of a static (CGO_ENABLED=0) binary.
	Binary string
	// Entrypoint is where the binary goes, e.g. "/coredns" as in the stock
	// CoreDNS image, so `-conf /etc/coredns/Corefile` args work unchanged.
	Entrypoint string
	// Ports are exposed ports such as "53/udp".
	Ports []string
	// CACertificates is the CA bundle to include.
	CACertificates string
	// BindLowPorts gives the binary the file capability
	// cap_net_bind_service=+ep, as the stock CoreDNS image does, so the
	// non-root user can serve port 53 when the pod adds NET_BIND_SERVICE.
	BindLowPorts bool
	// User is the image's user; empty means NonRoot. Kubernetes's own
	// component images (the test cluster's) run as root.
	User string
	// Files are more files: copies of host files (kube-proxy's iptables
	// and conntrack with their libraries, in the test cluster's image).
	Files []File
	// Platform is what Binary runs on; the zero value means this machine's.
	Platform v1.Platform
}

// Platforms are the platforms make image writes each image for: the cloud
// nodes, arm64 gateways and arm/v7 boards at the edge.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
	{OS: "linux", Architecture: "arm", Variant: "v7"},
}

// File is one more file of an image: a host file's copy, or a symlink.
type File struct {
	// Path is the absolute path in the image.
	Path string
	// Source is the host file to copy (its mode is kept); symlinks are followed.
	Source string
	// Link, instead of Source, makes Path a symlink to Link.
	Link string
}

// netBindServiceCapability is the security.capability xattr value for
// cap_net_bind_service=+ep: struct vfs_cap_data, revision 2, effective flag,
// permitted bit 10 (CAP_NET_BIND_SERVICE), little endian.
var netBindServiceCapability = string([]byte{
	0x01, 0x00, 0x00, 0x02, // VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE
	0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // permitted, inheritable (caps 0–31)
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // permitted, inheritable (caps 32–63)
})

// capabilityPAXKey is how tar carries the xattr; containerd and runc's
// unpackers set it on the file.
const capabilityPAXKey = "SCHILY.xattr.security.capability"

// epoch makes the layer reproducible: the same binary gives the same digest.
var epoch = time.Unix(0, 0).UTC()

// Build assembles the image.
func Build(s Spec) (v1.Image, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, err
	}
	certs, err := os.ReadFile(s.CACertificates)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	// mkdirs writes the parent directories of name not written yet, so the
	// layer is complete whatever unpacks it.
	mkdirs := func(name string) error {
		var parents []string
		for d := path.Dir(name); d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			d := parents[i]
			dirs[d] = true
			mode := int64(0o755)
			if d == "tmp" {
				mode = 0o1777
			}
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: epoch}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range []string{"etc/ssl/certs/x", "home/nonroot/x", "tmp/x"} {
		if err := mkdirs(d); err != nil {
			return nil, err
		}
	}
	type entry struct {
		name string
		mode int64
		data []byte
		link string
	}
	files := []entry{
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: s.Entrypoint[1:], mode: 0o755, data: bin},
	}
	for _, f := range s.Files {
		e := entry{name: strings.TrimPrefix(f.Path, "/"), link: f.Link}
		if f.Link == "" {
			info, err := os.Stat(f.Source)
			if err != nil {
				return nil, err
			}
			if e.data, err = os.ReadFile(f.Source); err != nil {
				return nil, err
			}
			e.mode = int64(info.Mode().Perm())
		}
		files = append(files, e)
	}
	written := map[string]bool{}
	for _, f := range files {
		if written[f.name] {
			continue // a library two binaries load
		}
		written[f.name] = true
		if err := mkdirs(f.name); err != nil {
			return nil, err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}
		if f.link != "" {
			hdr = &tar.Header{Typeflag: tar.TypeSymlink, Name: f.name, Linkname: f.link, Mode: 0o777, ModTime: epoch}
		}
		if f.name == s.Entrypoint[1:] && s.BindLowPorts {
			hdr.PAXRecords = map[string]string{capabilityPAXKey: netBindServiceCapability}
			hdr.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = s.Platform.OS, s.Platform.Architecture, s.Platform.Variant
	if cf.OS == "" {
		cf.OS, cf.Architecture = runtime.GOOS, runtime.GOARCH
	}
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{s.Entrypoint}
	cf.Config.User = NonRoot
	if s.User != "" {
		cf.Config.User = s.User
	}
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	cf.Config.ExposedPorts = map[string]struct{}{}
	for _, p := range s.Ports {
		cf.Config.ExposedPorts[p] = struct{}{}
	}
	return mutate.ConfigFile(img, cf)
}

// WriteOCIArchive writes img, tagged ref, as an OCI image layout tar file.
func WriteOCIArchive(path, ref string, img v1.Image) error {
	return writeLayout(path, func(p layout.Path) error { return p.AppendImage(img, refName(ref)) })
}

// WriteOCIIndexArchive writes imgs, one per platform (each config's), as
// one image index tagged ref in an OCI image layout tar file: every node
// pulls or imports the same reference and runs its own platform's image.
func WriteOCIIndexArchive(path, ref string, imgs []v1.Image) error {
	var manifests []mutate.IndexAddendum
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		manifests = append(manifests, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: cf.Platform()}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), manifests...)
	return writeLayout(path, func(p layout.Path) error { return p.AppendIndex(idx, refName(ref)) })
}

func refName(ref string) layout.Option {
	return layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})
}

// writeLayout writes an OCI image layout with what add puts in it, as a
// tar file at path.
func writeLayout(path string, add func(layout.Path) error) error {
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := add(p); err != nil {
		return err
	}
	return tarDir(dir, path)
}

// tarDir archives dir's files (sorted, fixed times) into path.
func tarDir(dir, path string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	tw := tar.NewWriter(out)
	for _, p := range names {
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: epoch, Typeflag: tar.TypeReg, Size: info.Size()}
		if info.IsDir() {
			hdr = &tar.Header{Name: filepath.ToSlash(rel) + "/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.IsDir() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return out.Close()
}
