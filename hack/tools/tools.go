//go:build tools

// Package tools pins the control-plane binaries the test harness runs.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
