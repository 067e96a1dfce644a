package steps

import (
	"context"

	"github.com/yurtdns/yurtdns/internal/install/engine"

	corev1 "k8s.io/api/core/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// What the steps need of the cluster, for the pre-flight check
// (internal/install/preflight) to read as the steps themselves do.

// YurtTunnelServer is the Deployment the tunnel-dns step rolls out.
const YurtTunnelServer = yurtTunnelServer

// OpenYurtVersion is the OpenYurt version the cluster runs and where it was
// read; nil when unknown.
func OpenYurtVersion(ctx context.Context, env *engine.Env) (*utilversion.Version, string, error) {
	return openYurtVersion(ctx, env)
}

// KeepNodeLifecycle says whether the control-plane step leaves
// kube-controller-manager alone, and why.
func KeepNodeLifecycle(ctx context.Context, env *engine.Env) (bool, string, error) {
	return keepNodeLifecycle(ctx, env)
}

// MayWatchListBehindYurthub: an edge node whose kubelet, by its version,
// watch-lists unless its WatchListClient gate is off (its gates are only
// readable through the node proxy).
func MayWatchListBehindYurthub(n *corev1.Node) bool { return watchListsBehindYurthub(n, nil) }

// WatchListFrom is the first kubelet version that watch-lists by default.
func WatchListFrom() string { return watchListFrom.String() }
