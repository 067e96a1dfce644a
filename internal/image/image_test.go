package image

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/test/harness"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"golang.org/x/sys/unix"
)

// untar extracts a tar stream into dir, with the xattrs the entries carry
// (as containerd does: that is how a file capability reaches the node).
func untar(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(os.PathSeparator)) {
			t.Fatalf("entry %q escapes the directory", h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
		for key, value := range h.PAXRecords {
			if name, ok := strings.CutPrefix(key, "SCHILY.xattr."); ok {
				if err := unix.Setxattr(p, name, []byte(value), 0); err != nil {
					t.Fatalf("%s: setting xattr %s: %v", h.Name, name, err)
				}
			}
		}
	}
}

// fileCapability reads the security.capability xattr, "" when absent.
func fileCapability(t *testing.T, path string) string {
	t.Helper()
	buf := make([]byte, 64)
	n, err := unix.Getxattr(path, "security.capability", buf)
	if errors.Is(err, unix.ENODATA) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

// serveAsNonRoot runs bin as the image's user 65532 with only
// NET_BIND_SERVICE in its bounding set (what the DaemonSet grants) on
// 127.0.53.53:53 and reports whether a query is answered.
func serveAsNonRoot(t *testing.T, bin string) error {
	t.Helper()
	// The unpacked tree lives in 0700 test directories: open the path.
	for dir := filepath.Dir(bin); dir != filepath.Clean(os.TempDir()) && dir != "/"; dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	corefile := filepath.Join(filepath.Dir(bin), "Corefile")
	if err := os.WriteFile(corefile, []byte(".:53 {\n    bind 127.0.53.53\n    whoami\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid=65532", "--regid=65532", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all,+net_bind_service", bin, "-conf", corefile)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill(); <-exited }()
	var last error
	for range 50 {
		select {
		case err := <-exited:
			exited <- err // for the deferred wait
			return fmt.Errorf("exited (%v):\n%s", err, out.String())
		default:
		}
		r, err := harness.DigErr("127.0.53.53:53", "whoami.example", "A")
		if err == nil && r.Status == "NOERROR" {
			return nil
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	exited <- <-exited // the output is complete once Wait returned
	return fmt.Errorf("not answering on port 53 as uid 65532: %v\n%s", last, out.String())
}

// TestImages builds both images, reads each archive back as an OCI layout,
// checks the config, unpacks the layers into a directory and runs the
// binary from there: static (no ELF interpreter), so the image needs nothing
// else.
func TestImages(t *testing.T) {
	for _, tc := range []struct {
		name, entrypoint string
		ports            []string
		bindLowPorts     bool
		run              [][]string
		wantOutput       []string
	}{
		{"coredns-yurt", "/coredns", []string{"53/udp", "53/tcp", "9153/tcp"}, true,
			[][]string{{"-version"}, {"-plugins"}}, []string{"CoreDNS-1.15.0+yurthosts-", "yurthosts"}},
		{"tunnel-nodes-sync", "/tunnel-nodes-sync", []string{"8080/tcp", "8081/tcp"}, false,
			[][]string{{"--version"}, {"install", "--help"}}, []string{"tunnel-nodes-sync version", "--control-plane-jobs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, err := Build(Spec{Binary: harness.Binary(t, tc.name), Entrypoint: tc.entrypoint, Ports: tc.ports,
				CACertificates: "/etc/ssl/certs/ca-certificates.crt", BindLowPorts: tc.bindLowPorts})
			if err != nil {
				t.Fatal(err)
			}
			archive := filepath.Join(t.TempDir(), tc.name+".tar")
			if err := WriteOCIArchive(archive, "yurtdns/"+tc.name+":test", img); err != nil {
				t.Fatal(err)
			}

			// Read it back the way a runtime would: untar the OCI layout.
			layoutDir := t.TempDir()
			f, err := os.Open(archive)
			if err != nil {
				t.Fatal(err)
			}
			untar(t, f, layoutDir)
			f.Close()
			idx, err := layout.ImageIndexFromPath(layoutDir)
			if err != nil {
				t.Fatal(err)
			}
			m, err := idx.IndexManifest()
			if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "yurtdns/"+tc.name+":test" {
				t.Fatalf("index: %v %+v", err, m)
			}
			loaded, err := idx.Image(m.Manifests[0].Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := loaded.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cf.Config.Entrypoint, []string{tc.entrypoint}) || cf.Config.User != NonRoot || cf.OS != "linux" {
				t.Errorf("config: entrypoint %v user %q os %q", cf.Config.Entrypoint, cf.Config.User, cf.OS)
			}
			for _, p := range tc.ports {
				if _, ok := cf.Config.ExposedPorts[p]; !ok {
					t.Errorf("port %s not exposed: %v", p, cf.Config.ExposedPorts)
				}
			}

			root := t.TempDir()
			layers, err := loaded.Layers()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range layers {
				rc, err := l.Uncompressed()
				if err != nil {
					t.Fatal(err)
				}
				untar(t, rc, root)
				rc.Close()
			}
			bin := filepath.Join(root, tc.entrypoint)
			e, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range e.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s is dynamically linked: the image has no libc", tc.entrypoint)
				}
			}
			e.Close()
			if _, err := os.Stat(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")); err != nil {
				t.Errorf("no CA certificates: %v", err)
			}
			wantCap := ""
			if tc.bindLowPorts {
				wantCap = netBindServiceCapability
			}
			if got := fileCapability(t, bin); got != wantCap {
				t.Errorf("file capability of %s = %x, want %x", tc.entrypoint, got, wantCap)
			}
			if tc.bindLowPorts {
				if os.Geteuid() != 0 {
					t.Skip("serving port 53 as uid 65532 needs root (setpriv, xattrs); CI runs as root")
				}
				if err := serveAsNonRoot(t, bin); err != nil {
					t.Error(err)
				}
				// The control: without the capability the same binary is refused.
				if err := unix.Removexattr(bin, "security.capability"); err != nil {
					t.Fatal(err)
				}
				if err := serveAsNonRoot(t, bin); err == nil {
					t.Error("uid 65532 served port 53 without the file capability: this machine allows unprivileged low ports, so the check above proves nothing")
				}
			}
			for i, args := range tc.run {
				out, err := exec.Command(bin, args...).CombinedOutput()
				if err != nil || !strings.Contains(string(out), tc.wantOutput[i]) {
					t.Errorf("%s %v: %v\n%s", tc.entrypoint, args, err, out)
				}
			}
		})
	}
}
