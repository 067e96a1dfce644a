package yurthosts

import (
	"fmt"
	"runtime"

	"github.com/yurtdns/yurtdns/internal/version"

	"github.com/coredns/coredns/coremain"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = userAgent()
	return cfg, nil
}

// client builds the clientset the watches use.
func (s source) client() (kubernetes.Interface, error) {
	cfg, err := s.restConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
