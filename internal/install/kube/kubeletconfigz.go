package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// maxConfigz bounds what is read of a kubelet's /configz (a few KiB).
const maxConfigz = 1 << 20

// KubeletConfigz reads node's kubelet configuration (/configz) through the
// apiserver's node proxy. The apiserver passes a node-proxy request on with
// the Host header its client sent, which names the apiserver: a tunnel that
// routes by Host, as yurt-tunnel-server does (ANP's destHost strategy),
// finds no agent for it and answers 503. Then it is asked again with Host
// naming the kubelet's endpoint, as the apiserver's own kubelet requests
// (logs, exec) do.
func KubeletConfigz(ctx context.Context, cs kubernetes.Interface, node string) ([]byte, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(ctx)
	rc, ok := cs.CoreV1().RESTClient().(*rest.RESTClient)
	if err == nil || !apierrors.IsServiceUnavailable(err) || !ok || rc.Client == nil {
		return raw, err
	}
	n, nerr := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if nerr != nil {
		return nil, err
	}
	port := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port == 0 {
		port = 10250
	}
	req, rerr := http.NewRequestWithContext(ctx, http.MethodGet, rc.Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").URL().String(), nil)
	if rerr != nil {
		return nil, rerr
	}
	req.Host = node + ":" + strconv.Itoa(port)
	resp, derr := rc.Client.Do(req)
	if derr != nil {
		return nil, fmt.Errorf("%w; asked again with Host %s: %v", err, req.Host, derr)
	}
	defer resp.Body.Close()
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxConfigz))
	if rerr != nil {
		return nil, rerr
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w; asked again with Host %s: %s", err, req.Host, resp.Status)
	}
	return body, nil
}
