package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one program the cluster started, recorded by PID in the
// cluster directory so that a later run can stop it if this one is killed.
type process struct {
	name    string
	pid     int
	pidFile string
	exited  chan struct{}
}

func (c *Cluster) start(name string, cmd *exec.Cmd) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, pid: cmd.Process.Pid, pidFile: filepath.Join(c.dir, "run", name+".pid"), exited: make(chan struct{})}
	if err := os.WriteFile(p.pidFile, []byte(strconv.Itoa(p.pid)), 0o644); err != nil {
		return nil, err
	}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.exited:
	default:
		syscall.Kill(p.pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
			syscall.Kill(p.pid, syscall.SIGKILL)
			<-p.exited
		}
	}
	os.Remove(p.pidFile)
}

// killPID stops a process this package did not start in this run (one
// recorded by a killed run, or found in a node's namespace or cgroup):
// SIGTERM, SIGKILL after grace.
func killPID(pid int, grace time.Duration) {
	if pid <= 1 || pid == os.Getpid() {
		return
	}
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil || isZombie(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

func isZombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// pidsInNetns lists the processes whose network namespace is the one
// mounted at /run/netns/name.
func pidsInNetns(name string) []int {
	var want syscall.Stat_t
	if syscall.Stat("/run/netns/"+name, &want) != nil {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && st.Ino == want.Ino && st.Dev == want.Dev {
			pids = append(pids, pid)
		}
	}
	return pids
}

// pidsInCgroup lists the processes in a cgroup subtree of any hierarchy
// (every container of a node under the kubelet's cgroupRoot, or the
// instruments' cgroup).
func pidsInCgroup(root string) []int {
	var pids []int
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(path)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}
