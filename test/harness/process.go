package harness

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

var (
	buildMu    sync.Mutex
	buildDir   string
	builtPaths = map[string]string{}
)

// Binary builds ./cmd/NAME of this module (static, CGO_ENABLED=0, as the
// images ship it) once per process and returns the path of the executable.
func Binary(t TB, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if path, ok := builtPaths[name]; ok {
		return path
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if buildDir == "" {
		// Not t.TempDir: the binary outlives the test that first asked for it.
		if buildDir, err = os.MkdirTemp("", "yurtdns-bin-"); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(buildDir, name)
	// Static, as in the images (and sharing their build cache).
	cmd := exec.Command("go", "build", "-trimpath", "-o", path, "./cmd/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	builtPaths[name] = path
	return path
}

// BinaryAt builds ./cmd/NAME of this module as it was at commit (from the
// repository's history, into a directory of the test's), to measure it side
// by side with today's.
func BinaryAt(t TB, commit, name string) string {
	t.Helper()
	paths, err := BuildAt(commit, t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return paths[0]
}

// BuildAt builds ./cmd/NAME for each of names as the module was at commit,
// static, into dir/bin; dir holds the commit's source. The paths come in
// names' order.
func BuildAt(commit, dir string, names ...string) ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, commit, dir)
	if out, err := archive.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git archive %s: %v\n%s", commit, err, out)
	}
	var paths []string
	for _, name := range names {
		path := filepath.Join(dir, "bin", name)
		cmd := exec.Command("go", "build", "-trimpath", "-o", path, "./cmd/"+name)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/%s at %s: %v\n%s", name, commit, err, out)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// Process is a project binary running as a subprocess.
type Process struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	output bytes.Buffer
	done   chan struct{}
	// exitErr is how the process ended; read only after done is closed.
	exitErr error
}

// Write collects the process's output (both streams).
func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.Write(b)
}

// Output returns everything the process has printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// StartProcess runs bin with args. When the test ends the process is
// stopped, and its output is logged if the test failed.
func StartProcess(t TB, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("output of %s %v:\n%s", filepath.Base(bin), args, p.Output())
		}
	})
	return p
}

// Pid is the operating-system process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the process to exit by itself and returns how it ended
// (nil for exit status 0); it fails the test after timeout.
func (p *Process) Wait(t TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.exitErr
	case <-time.After(timeout):
		t.Fatalf("%s still running after %s:\n%s", p.cmd.Path, timeout, p.Output())
		return nil
	}
}

// Stop sends SIGTERM, waits up to 10 s, then kills.
func (p *Process) Stop() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// WaitHTTP200 polls url until it answers 200 OK, failing the test after
// timeout or when the process exits first.
func (p *Process) WaitHTTP200(t TB, url string, timeout time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if p.Exited() {
			t.Fatalf("process exited before %s answered:\n%s", url, p.Output())
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s not ready after %s (last: %s)", url, timeout, last)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, is
// also free for UDP, and is reserved for this process (reservePort).
func FreePort(t TB) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		reserved, err := reservePort(port)
		if err != nil {
			t.Fatal(err)
		}
		if reserved {
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// portReservations are the ports FreePort returned, each a lock held on a
// file until this process exits. A port closed a moment ago is the kernel's
// next pick, in this process (yurthub failed on "address already in use"
// when its secure and multiplexer ports came out equal) and in the other
// test processes make test runs at once; and CoreDNS listens with
// SO_REUSEPORT, so two servers handed one port both start and answer each
// other's queries. envtest's own port picker (controller-runtime's
// addr.Suggest) reserves its ports the same way in the same directory, so
// neither hands out the other's.
var (
	portReservationsMu sync.Mutex
	portReservations   []*os.File
)

// portReservationDir is envtest's: the user cache directory's
// kubebuilder-envtest, else the temporary directory's.
var portReservationDir = sync.OnceValues(func() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "kubebuilder-envtest")
	return dir, os.MkdirAll(dir, 0o750)
})

// reservePort locks port's file for this process; false when another
// process, or an earlier FreePort of this one, holds it (flock locks are
// per open file, not per process).
func reservePort(port int) (bool, error) {
	dir, err := portReservationDir()
	if err != nil {
		return false, err
	}
	path := filepath.Join(dir, fmt.Sprintf("port-%d", port))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	// envtest deletes the reservations older than two minutes.
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		f.Close()
		return false, err
	}
	portReservationsMu.Lock()
	portReservations = append(portReservations, f)
	portReservationsMu.Unlock()
	return true, nil
}

// Eventually calls check until it returns nil or timeout passes, then fails
// the test with check's last error.
func Eventually(t TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
