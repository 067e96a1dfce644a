//go:build tools

// Package tools pins prometheus-operator v0.85.0's operator and
// prometheus-config-reloader for the monitoring test on the kubeadm cluster
// (issue 49), with the release's own build list (see ../prometheus/tools.go).
// The release's go.mod replaces its pkg/apis/monitoring and pkg/client
// submodules with its own tree; a dependent module cannot, so it requires them
// at the same version.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
	_ "github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader"
)
