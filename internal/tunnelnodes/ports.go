package tunnelnodes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Keys of the tunnel server config ConfigMap that list extra proxied ports.
const (
	HTTPSProxyPortsKey = "https-proxy-ports"
	HTTPProxyPortsKey  = "http-proxy-ports"
	// DNATPortsPairKey is the legacy "port=targetPort,..." form.
	DNATPortsPairKey = "dnat-ports-pair"

	// DNATPortPrefix names the Service ports the sync owns: "dnat-9100".
	DNATPortPrefix = "dnat-"

	// Default target ports: the tunnel server's HTTPS and HTTP proxies.
	DefaultHTTPSTargetPort = 10263
	DefaultHTTPTargetPort  = 10264

	// The kubelet ports are always on the tunnel Service; never remapped.
	kubeletHTTPSPort = 10250
	kubeletHTTPPort  = 10255

	// maxPortEntries bounds the work done on a hostile config.
	maxPortEntries = 1024
)

// PortMapping is one extra port of the tunnel Service.
type PortMapping struct {
	Port       int32
	TargetPort int32
}

// Name is the Service port name the sync gives the mapping.
func (m PortMapping) Name() string { return DNATPortPrefix + strconv.Itoa(int(m.Port)) }

// PortError is a skipped entry of the server config.
type PortError struct {
	Key, Entry, Reason string
}

func (e PortError) Error() string {
	return fmt.Sprintf("%s entry %q: %s", e.Key, truncate(e.Entry), e.Reason)
}

// ParsePortMappings reads the extra ports from the tunnel server config:
// https-proxy-ports map to httpsTarget, http-proxy-ports to httpTarget, and
// the legacy dnat-ports-pair "port=target" entries as written. Entries are
// comma separated and trimmed; ports are 1–65535; the kubelet ports 10250
// and 10255 are ignored. On overlap https wins, then http, then the legacy
// pairs. Bad entries are returned as errors and skipped; the result is
// sorted by port.
func ParsePortMappings(data map[string]string, httpsTarget, httpTarget int32) ([]PortMapping, []PortError) {
	byPort := map[int32]int32{}
	var bad []PortError
	// Lowest precedence first: later keys overwrite.
	for _, key := range []string{DNATPortsPairKey, HTTPProxyPortsKey, HTTPSProxyPortsKey} {
		raw, ok := data[key]
		if !ok {
			continue
		}
		entries := strings.Split(raw, ",")
		if len(entries) > maxPortEntries {
			bad = append(bad, PortError{Key: key, Entry: raw, Reason: fmt.Sprintf("more than %d entries", maxPortEntries)})
			continue
		}
		for _, entry := range entries {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			port, target, err := parsePortEntry(key, entry, httpsTarget, httpTarget)
			if err != "" {
				bad = append(bad, PortError{Key: key, Entry: entry, Reason: err})
				continue
			}
			if port == kubeletHTTPSPort || port == kubeletHTTPPort {
				continue
			}
			byPort[port] = target
		}
	}
	mappings := make([]PortMapping, 0, len(byPort))
	for port, target := range byPort {
		mappings = append(mappings, PortMapping{Port: port, TargetPort: target})
	}
	slices.SortFunc(mappings, func(a, b PortMapping) int { return int(a.Port - b.Port) })
	return mappings, bad
}

func parsePortEntry(key, entry string, httpsTarget, httpTarget int32) (port, target int32, reason string) {
	switch key {
	case HTTPSProxyPortsKey:
		port, reason = parsePort(entry)
		return port, httpsTarget, reason
	case HTTPProxyPortsKey:
		port, reason = parsePort(entry)
		return port, httpTarget, reason
	}
	p, t, ok := strings.Cut(entry, "=")
	if !ok {
		return 0, 0, "want port=targetPort"
	}
	if port, reason = parsePort(strings.TrimSpace(p)); reason != "" {
		return 0, 0, reason
	}
	target, reason = parsePort(strings.TrimSpace(t))
	return port, target, reason
}

func parsePort(s string) (int32, string) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, "not a port number"
	}
	if n < 1 || n > 65535 {
		return 0, "port out of range 1-65535"
	}
	return int32(n), ""
}
