//go:build tools

// Package tools pins OpenYurt's yurthub for the edge-autonomy tests. It is a
// module of its own: openyurt replaces k8s.io/kubernetes with v1.34.0, which
// cannot share a build list with hack/tools's v1.37.1.
package tools

import _ "github.com/openyurtio/openyurt/cmd/yurthub"
