//go:build tools

// Package tools pins Prometheus v3.16.0 (module version v0.316.0) for the
// monitoring test on the kubeadm cluster (issue 49). Each monitoring project
// has a module of its own so that it builds with exactly its release's
// dependency versions: one build list would move prometheus-operator v0.85.0
// from Kubernetes v0.33 and Prometheus v0.305 to v0.37 and v0.316.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
