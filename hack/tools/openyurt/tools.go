//go:build tools

// Package tools pins OpenYurt v1.7.0's binaries for the tests: yurthub (the
// edge-autonomy tests and worker-1 of the kubeadm cluster), yurt-manager,
// yurt-tunnel-server and yurt-tunnel-agent (the kubeadm cluster). It is a
// module of its own: openyurt replaces k8s.io/kubernetes with v1.34.0, which
// cannot share a build list with hack/tools's v1.37.1.
package tools

import (
	_ "github.com/openyurtio/openyurt/cmd/yurt-manager"
	_ "github.com/openyurtio/openyurt/cmd/yurt-tunnel-agent"
	_ "github.com/openyurtio/openyurt/cmd/yurt-tunnel-server"
	_ "github.com/openyurtio/openyurt/cmd/yurthub"
)
