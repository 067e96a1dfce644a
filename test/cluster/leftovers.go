package cluster

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
)

// formatSettings gives machineSysctls' values as "key=value" each, in
// machineSysctls' order.
func formatSettings(values map[string]string) string {
	var settings []string
	for _, k := range machineSysctls {
		settings = append(settings, k+"="+values[k])
	}
	return strings.Join(settings, " ")
}

// readMachineSysctls reads machineSysctls' values.
func readMachineSysctls() (map[string]string, error) {
	values := map[string]string{}
	for _, k := range machineSysctls {
		v, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			return nil, err
		}
		values[k] = strings.TrimSpace(string(v))
	}
	return values, nil
}

// Leftovers is what the stopped cluster left on the machine: its nodes'
// network namespaces, its directory, the instruments' cgroup, kernel settings
// other than before it started (after it put back those a killed run left);
// nil when nothing.
func (c *Cluster) Leftovers() error {
	var left []error
	out, err := exec.Command("ip", "netns", "list").Output()
	switch {
	case err != nil:
		left = append(left, fmt.Errorf("ip netns list: %w", err))
	case strings.Contains(string(out), "yurtdns-"):
		left = append(left, fmt.Errorf("network namespaces left: %s", out))
	}
	if _, err := os.Stat(instrumentsCPUCgroup); !os.IsNotExist(err) {
		left = append(left, fmt.Errorf("cgroup %s left (%v)", instrumentsCPUCgroup, err))
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		left = append(left, fmt.Errorf("cluster directory %s left (%v)", c.Dir(), err))
	}
	after, err := readMachineSysctls()
	switch {
	case err != nil:
		left = append(left, err)
	case !maps.Equal(after, c.settingsBefore):
		left = append(left, fmt.Errorf("kernel settings not restored: before %s, after %s", formatSettings(c.settingsBefore), formatSettings(after)))
	}
	return errors.Join(left...)
}
