package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// instrumentsCPUCgroup is where the process that drives the cluster takes
// its CPU, with what it starts from then on: the probes' dig, kubectl, the
// sync's command line, the load balancer. They stand outside the nodes, as
// a user's laptop and a load balancer do, and weigh the most a cgroup can
// (instrumentsShares), so a probe's clock times the path it asks over, not
// its own turn on two cores the six nodes saturate. At the root, beside the
// nodes, each of their threads weighed as much as a whole node: in a revert
// the test's own goroutines waited up to 650 ms to read an answer dig had.
const instrumentsCPUCgroup = "/sys/fs/cgroup/cpu/yurtdns-instruments"

// instrumentsShares is cgroup v1's largest cpu.shares.
const instrumentsShares = "262144"

// joinInstrumentsCgroup moves this process into instrumentsCPUCgroup.
func joinInstrumentsCgroup() error {
	if err := os.MkdirAll(instrumentsCPUCgroup, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(instrumentsCPUCgroup, "cpu.shares"), []byte(instrumentsShares), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(instrumentsCPUCgroup, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("moving the test into %s: %w", instrumentsCPUCgroup, err)
	}
	return nil
}

// leaveInstrumentsCgroup moves what is left in instrumentsCPUCgroup (this
// process, or a killed run's children) back to the root cgroup, and
// removes it.
func leaveInstrumentsCgroup() error {
	for _, pid := range pidsInCgroup(instrumentsCPUCgroup) {
		// A process that has exited since the read is not an error.
		os.WriteFile(filepath.Join(filepath.Dir(instrumentsCPUCgroup), "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
	}
	return removeCgroups(filepath.Base(instrumentsCPUCgroup))
}
