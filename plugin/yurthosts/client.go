package yurthosts

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"time"

	"github.com/yurtdns/yurtdns/internal/version"

	"github.com/coredns/coredns/coremain"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"
)

// userAgent starts with "coredns/" so that yurthub, which caches responses
// for the user agents in its cache-agents list ("coredns" by default), keeps
// serving these objects to an edge node that has lost the cloud.
func userAgent() string {
	return fmt.Sprintf("coredns/%s yurthosts/%s (%s/%s)", coremain.CoreVersion, version.Version, runtime.GOOS, runtime.GOARCH)
}

// yurthub's ports on every node it runs on (its --proxy-port and
// --serve-port defaults, on 127.0.0.1).
const (
	defaultYurthubProxy   = "http://127.0.0.1:10261"
	defaultYurthubHealthz = "http://127.0.0.1:10267/v1/healthz"
)

// yurthubProbeTimeout bounds the look for yurthub as the server starts;
// where nothing listens the connection is refused at once.
const yurthubProbeTimeout = time.Second

// restConfig builds the client config: yurthub's proxy when the Corefile
// asks for it and yurthub answers its health check, else the kubeconfig
// when the Corefile names one, else the in-cluster service account.
//
// Through yurthub the requests carry no credentials: yurthub forwards them
// with the node's own client certificate (as the kubelet's), and caches
// them for the User-Agent as it does for a pod's. A pod's ServiceAccount
// token is no use right after its edge node restarted cut off from the
// cloud: yurthub made it up, and the apiserver refuses it until the
// kubelet's next sync of the pod writes a real one, a minute or more after
// the cloud is back. The node's certificate is real all along.
func (s source) restConfig() (*rest.Config, error) {
	if s.yurthubProxy != "" {
		err := probeYurthub(s.yurthubHealthz, s.yurthubProxy)
		if err == nil {
			log.Infof("reading through yurthub at %s with the node's identity", s.yurthubProxy)
			return withClientDefaults(&rest.Config{Host: s.yurthubProxy}), nil
		}
		log.Infof("no yurthub on this node (%v): reading with %s", err, s.credentials())
	}
	var cfg *rest.Config
	var err error
	if s.kubeconfig != "" {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: s.kubeconfig}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: s.kubeContext}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rereadTokenOn401(cfg)
	return withClientDefaults(cfg), nil
}

// credentials names what the client reads with when not through yurthub.
func (s source) credentials() string {
	if s.kubeconfig != "" {
		return "kubeconfig " + s.kubeconfig
	}
	return "the in-cluster service account"
}

// probeYurthub asks yurthub's health check once, then connects to its
// proxy: yurthub may serve its proxy on another address (its
// --bind-proxy-address, or only its dummy interface's), and a proxy that
// refuses would leave the records unread.
func probeYurthub(healthz, proxy string) error {
	resp, err := (&http.Client{Timeout: yurthubProbeTimeout}).Get(healthz)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", healthz, resp.Status)
	}
	u, err := url.Parse(proxy)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(u.Hostname(), port), yurthubProbeTimeout)
	if err != nil {
		return fmt.Errorf("%s answers, its proxy %s does not: %w", healthz, proxy, err)
	}
	return conn.Close()
}

// withClientDefaults sets what every client of the plugin sends.
func withClientDefaults(cfg *rest.Config) *rest.Config {
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = userAgent()
	return cfg
}

// rereadTokenOn401 makes the client read its token file again as soon as
// the apiserver refuses the token, where client-go reads it once a minute.
// On an edge node that restarted while cut off, yurthub gave the pod a
// made-up token so it could start; once the cloud is back the apiserver
// refuses it until the kubelet writes a real one, and the records' first
// list after that should not wait for the next minute.
func rereadTokenOn401(cfg *rest.Config) {
	if cfg.BearerTokenFile == "" {
		return
	}
	token := transport.NewCachedFileTokenSource(cfg.BearerTokenFile)
	cfg.BearerToken, cfg.BearerTokenFile = "", ""
	cfg.Wrap(transport.ResettableTokenSourceWrapTransport(token))
}

// client builds the clientset the watches use.
func (s source) client() (kubernetes.Interface, error) {
	cfg, err := s.restConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
