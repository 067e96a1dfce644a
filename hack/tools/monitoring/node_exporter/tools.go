//go:build tools

// Package tools pins node_exporter v1.12.1 for the monitoring test on the
// kubeadm cluster (issue 49), with the release's own build list (see
// ../prometheus/tools.go).
package tools

import _ "github.com/prometheus/node_exporter"
