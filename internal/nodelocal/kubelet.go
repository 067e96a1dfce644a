package nodelocal

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// kubeletProcess is a running kubelet: its PID and start time (a PID can
// be reused; the pair cannot).
type kubeletProcess struct {
	pid   int
	start string
}

// findKubelet finds the kubelet of this node: the process named kubelet in
// this process's network namespace (the Job is hostNetwork and hostPID; a
// machine running several nodes, each in its own namespace, has several
// kubelets).
func findKubelet(proc string) (kubeletProcess, error) {
	self, err := os.Readlink(filepath.Join(proc, "self/ns/net"))
	if err != nil {
		return kubeletProcess{}, fmt.Errorf("reading this process's network namespace: %w", err)
	}
	dirs, err := os.ReadDir(proc)
	if err != nil {
		return kubeletProcess{}, err
	}
	var found []kubeletProcess
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(proc, d.Name())
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "kubelet" {
			continue
		}
		if ns, err := os.Readlink(filepath.Join(dir, "ns/net")); err != nil || ns != self {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		// Field 22 is the start time; the command name (field 2) may hold
		// spaces, so count after its closing parenthesis.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 20 {
			continue
		}
		found = append(found, kubeletProcess{pid: pid, start: fields[19]})
	}
	switch len(found) {
	case 0:
		return kubeletProcess{}, fmt.Errorf("no kubelet process in this network namespace (the Job runs with hostNetwork and hostPID)")
	case 1:
		return found[0], nil
	}
	return kubeletProcess{}, fmt.Errorf("%d kubelet processes in this network namespace: cannot tell which to restart", len(found))
}

// kubeletOlderThan reports whether the node's kubelet started before file
// was last written (so it runs an older version of it).
func kubeletOlderThan(file string) (bool, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return false, err
	}
	k, err := findKubelet("/proc")
	if err != nil {
		return false, err
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return false, err
	}
	var boot int64
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	ticks, err := strconv.ParseInt(k.start, 10, 64)
	if err != nil || boot == 0 {
		return false, fmt.Errorf("cannot tell when the kubelet (pid %d) started", k.pid)
	}
	// Start times count clock ticks since boot, 100 a second on Linux.
	started := time.Unix(boot, 0).Add(time.Duration(ticks) * time.Second / 100)
	return started.Before(fi.ModTime()), nil
}

// RestartKubelet stops the node's kubelet with SIGTERM, as `systemctl
// restart kubelet` does, and waits until its supervisor has started a new
// one (kubeadm's kubelet.service has Restart=always) and it is healthy: the
// kubelet reads its configuration only when it starts. Its pods keep
// running meanwhile.
func RestartKubelet(ctx context.Context, cfg KubeletConfig, timeout time.Duration) (newPID int, err error) {
	const proc = "/proc"
	old, err := findKubelet(proc)
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(old.pid, syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("stopping the kubelet (pid %d): %w", old.pid, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var now kubeletProcess
	for {
		now, err = findKubelet(proc)
		if err == nil && now != old {
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the kubelet (pid %d) got SIGTERM and no new kubelet started within %s: its supervisor must restart it (kubeadm's kubelet.service has Restart=always)", old.pid, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if cfg.HealthzPort == 0 {
		return now.pid, nil
	}
	url := "http://" + net.JoinHostPort(cfg.HealthzBindAddress, strconv.Itoa(cfg.HealthzPort)) + "/healthz"
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return now.pid, nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the new kubelet (pid %d) not healthy at %s within %s", now.pid, url, timeout)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
