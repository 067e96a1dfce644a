package yurthosts

import (
	"fmt"
	"runtime"

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

// restConfig builds the client config: the kubeconfig when the Corefile
// names one, else the in-cluster service account.
func (s source) restConfig() (*rest.Config, error) {
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
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = userAgent()
	return cfg, nil
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
