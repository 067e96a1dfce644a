package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// maxConfigz bounds what is read of a kubelet's /configz (a few KiB).
const maxConfigz = 1 << 20

// configzTimeout bounds each read of a /configz. A tunnel whose agent lost
// its connection without knowing (a cut: the agent keeps it until TCP
// keepalive, 2 h idle) takes the apiserver's proxy request and never
// answers; unbounded, status and install waited on it without a word (seen
// for 20 minutes on the real cluster after worker-1's agent was restarted).
// A var so a test need not wait as long.
var configzTimeout = 15 * time.Second

// NodeNameNotProxyableError is the apiserver's node proxy refusing a node
// because its name resolves, where the apiserver runs, to an address that
// is not global unicast: an /etc/hosts line such as Debian's installer
// writes (`127.0.1.1 <hostname>`) on the apiserver's node. The apiserver
// dials nodes by name once install makes it prefer Hostname, so its node
// proxy (kubectl get --raw .../proxy, /configz) then refuses that node;
// kubectl logs and exec do not check and still work.
type NodeNameNotProxyableError struct {
	Node    string
	Message string // the apiserver's
}

func (e *NodeNameNotProxyableError) Error() string {
	return fmt.Sprintf("the apiserver's node proxy refuses node %s (%q): the name %s resolves, where kube-apiserver runs, "+
		"to a loopback or link-local address (an /etc/hosts line such as `127.0.1.1 %s`, which Debian's installer writes); "+
		"remove that line from the node's /etc/hosts", e.Node, e.Message, e.Node, e.Node)
}

// notProxyable is the apiserver's message for a node name that resolves to
// an address it will not proxy to (pkg/registry/core/node's
// isProxyableHostname).
const notProxyable = "address not allowed"

// KubeletConfigz reads node's kubelet configuration (/configz) through the
// apiserver's node proxy. The apiserver passes a node-proxy request on with
// the Host header its client sent, which names the apiserver: a tunnel that
// routes by Host, as yurt-tunnel-server does (ANP's destHost strategy),
// finds no agent for it and answers 503. Then it is asked again with Host
// naming the kubelet's endpoint, as the apiserver's own kubelet requests
// (logs, exec) do.
func KubeletConfigz(ctx context.Context, cs kubernetes.Interface, node string) ([]byte, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, configzTimeout,
		fmt.Errorf("node %s's /configz gave no answer through the apiserver in %s (the node's tunnel may be down)", node, configzTimeout))
	defer cancel()
	raw, err := configz(ctx, cs, node)
	if err != nil && context.Cause(ctx) != nil {
		return nil, context.Cause(ctx)
	}
	return raw, err
}

// configz is KubeletConfigz unbounded.
func configz(ctx context.Context, cs kubernetes.Interface, node string) ([]byte, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(ctx)
	if apierrors.IsBadRequest(err) {
		return nil, badRequest(node, err, raw)
	}
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

// badRequest keeps the apiserver's reason for a 400, which client-go's
// error for a body that is no Status drops ("the server rejected our
// request for an unknown reason"), and names a node the proxy refuses.
func badRequest(node string, err error, body []byte) error {
	msg := strings.TrimSpace(string(body[:min(len(body), 512)]))
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" && !strings.Contains(msg, status.Status().Message) {
		msg = strings.TrimSpace(status.Status().Message + " " + msg)
	}
	if strings.Contains(msg, notProxyable) {
		return &NodeNameNotProxyableError{Node: node, Message: notProxyable}
	}
	return fmt.Errorf("%w: %s", err, msg)
}
