// Package imagearchive checks the image archives make image writes, as a
// node of each platform would use them: one reference, an image per
// platform, each with a binary its CPU runs. The arm ones run here under
// qemu user emulation (Debian's qemu-user, which make deps installs).
package imagearchive

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/image"
	"github.com/yurtdns/yurtdns/test/harness"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// archives are make image's outputs, with their entrypoints.
var archives = map[string]string{"coredns-yurt": "/coredns", "tunnel-nodes-sync": "/tunnel-nodes-sync"}

// machines is each platform's ELF machine.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM}

// emulators run a platform's binaries on this machine.
var emulators = map[string]string{"arm64": "qemu-aarch64", "arm": "qemu-arm"}

func binDir(t *testing.T) string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "bin")
}

// openArchive unpacks an OCI image layout tar file (as `ctr images import`
// reads it) and returns its one reference and the image index behind it.
func openArchive(t *testing.T, path string) (string, v1.ImageIndex) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (make test runs make image first)", err)
	}
	defer f.Close()
	dir := t.TempDir()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		out, err := os.Create(dst)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, tr); err != nil {
			t.Fatal(err)
		}
		out.Close()
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("%s holds %d references, want 1", path, len(top.Manifests))
	}
	idx, err := root.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatalf("%s: its reference is no image index: %v", path, err)
	}
	return top.Manifests[0].Annotations["org.opencontainers.image.ref.name"], idx
}

// entrypoint is the image's entrypoint file and its tar header.
func entrypoint(t *testing.T, img v1.Image, path string) (*tar.Header, []byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the layer: %v", path, err)
		}
		if "/"+hdr.Name == path {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return hdr, data
		}
	}
}

// platformImages are the index's images by architecture, checked to be
// exactly image.Platforms, each config saying its platform and each binary
// built for it.
func platformImages(t *testing.T, name string) map[string][]byte {
	t.Helper()
	checkedMu.Lock()
	defer checkedMu.Unlock()
	if binaries, ok := checked[name]; ok {
		return binaries
	}
	binaries := checkArchive(t, name)
	checked[name] = binaries
	return binaries
}

// checked are the archives checked so far, by name: each is unpacked and
// checked once, whichever test asks first.
var (
	checkedMu sync.Mutex
	checked   = map[string]map[string][]byte{}
)

func checkArchive(t *testing.T, name string) map[string][]byte {
	t.Helper()
	ref, idx := openArchive(t, filepath.Join(binDir(t), name+".oci.tar"))
	if !strings.HasPrefix(ref, "docker.io/yurtdns/"+name+":") {
		t.Errorf("reference %q, want docker.io/yurtdns/%s:VERSION", ref, name)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Manifests {
		got = append(got, d.Platform.String())
	}
	var want []string
	for _, p := range image.Platforms {
		want = append(want, p.String())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s's index lists %v, want %v", name, got, want)
	}
	binaries := map[string][]byte{}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !cf.Platform().Equals(*d.Platform) {
			t.Errorf("%s %s: the config says %s", name, d.Platform, cf.Platform())
		}
		hdr, data := entrypoint(t, img, archives[name])
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s %s: %s is no ELF binary: %v", name, d.Platform, archives[name], err)
		}
		if f.Machine != machines[d.Platform.Architecture] {
			t.Errorf("%s %s: %s is built for %s", name, d.Platform, archives[name], f.Machine)
		}
		if name == "coredns-yurt" && hdr.PAXRecords["SCHILY.xattr.security.capability"] == "" {
			t.Errorf("%s %s: /coredns lost its cap_net_bind_service file capability", name, d.Platform)
		}
		binaries[d.Platform.Architecture] = data
	}
	return binaries
}

func TestArchivesHoldEveryPlatform(t *testing.T) {
	for name := range archives {
		t.Run(name, func(t *testing.T) { platformImages(t, name) })
	}
}

// writeBinary puts an image's binary in a file to run.
func writeBinary(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func emulator(t *testing.T, arch string) string {
	t.Helper()
	qemu, err := exec.LookPath(emulators[arch])
	if err != nil {
		t.Fatalf("%v: make deps installs qemu-user", err)
	}
	return qemu
}

// The arm images' binaries start under emulation and say their version.
func TestArmBinariesRunUnderEmulation(t *testing.T) {
	for name, flag := range map[string]string{"coredns-yurt": "-version", "tunnel-nodes-sync": "--version"} {
		binaries := platformImages(t, name)
		for arch := range emulators {
			t.Run(name+"/"+arch, func(t *testing.T) {
				out, err := exec.Command(emulator(t, arch), writeBinary(t, binaries[arch]), flag).CombinedOutput()
				if err != nil || !strings.Contains(string(out), "yurthosts-") && !strings.Contains(string(out), "version") {
					t.Errorf("%s %s under %s: %v\n%s", name, flag, emulators[arch], err, out)
				}
			})
		}
	}
}

// coredns-yurt of each arm image serves DNS under emulation: dig gets the
// record of its Corefile.
func TestArmCoreDNSAnswersUnderEmulation(t *testing.T) {
	binaries := platformImages(t, "coredns-yurt")
	for arch := range emulators {
		t.Run(arch, func(t *testing.T) {
			port := harness.FreePort(t)
			corefile := filepath.Join(t.TempDir(), "Corefile")
			conf := fmt.Sprintf(".:%d {\n    bind 127.0.0.1\n    hosts {\n        198.51.100.77 emulated-%s.example\n    }\n}\n", port, arch)
			if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(emulator(t, arch), writeBinary(t, binaries[arch]), "-conf", corefile)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }() // by its PID
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for {
				r, err := harness.DigWith(func(args ...string) ([]byte, error) {
					return exec.CommandContext(ctx, "dig", args...).CombinedOutput()
				}, fmt.Sprintf("127.0.0.1:%d", port), "emulated-"+arch+".example", "A")
				if err == nil && strings.Join(r.Data("A"), ",") == "198.51.100.77" {
					return
				}
				if ctx.Err() != nil {
					t.Fatalf("coredns-yurt %s under %s: no answer within a minute: %v %s\n%s", arch, emulators[arch], err, r.Raw, out.String())
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// The same binaries give the same archive, byte for byte.
func TestArchiveIsReproducible(t *testing.T) {
	bin := binDir(t)
	var archives [2][]byte
	for i := range archives {
		var imgs []v1.Image
		for _, p := range image.Platforms {
			img, err := image.Build(image.Spec{Binary: filepath.Join(bin, "linux_"+p.Architecture, "tunnel-nodes-sync"),
				Entrypoint: "/tunnel-nodes-sync", CACertificates: "/etc/ssl/certs/ca-certificates.crt", Platform: p})
			if err != nil {
				t.Fatal(err)
			}
			imgs = append(imgs, img)
		}
		path := filepath.Join(t.TempDir(), "a.oci.tar")
		if err := image.WriteOCIIndexArchive(path, "docker.io/yurtdns/tunnel-nodes-sync:test", imgs); err != nil {
			t.Fatal(err)
		}
		var err error
		if archives[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two archives of the same binaries differ (%d and %d bytes)", len(archives[0]), len(archives[1]))
	}
}
