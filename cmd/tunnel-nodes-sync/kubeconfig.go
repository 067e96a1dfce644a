package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/kubewait"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeconfigHelp is what --kubeconfig does when empty, as kubectl.
const kubeconfigHelp = "Path to the kubeconfig file; when empty, $KUBECONFIG, else ~/.kube/config, else the in-cluster config (in a pod)"

// kubeconfigFlags are kubectl's --kubeconfig and --context.
type kubeconfigFlags struct {
	path, context string
}

// register adds --kubeconfig (with help) and --context to cmd, with the
// kubeconfig's contexts as --context's completions.
func (k *kubeconfigFlags) register(cmd *cobra.Command, help string) {
	cmd.Flags().StringVar(&k.path, "kubeconfig", "", help)
	cmd.Flags().StringVar(&k.context, "context", "", "The kubeconfig context to use; when empty, its current-context")
	mustRegisterCompletion(cmd, "context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		cfg, err := k.loader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return slices.Sorted(maps.Keys(cfg.Contexts)), cobra.ShellCompDirectiveNoFileComp
	})
}

// given reports whether either flag was set.
func (k *kubeconfigFlags) given() bool { return k.path != "" || k.context != "" }

// loader loads the client config as kubectl does (clientcmd's loading
// rules, the in-cluster config when no kubeconfig is found).
func (k *kubeconfigFlags) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context})
}

// noKubeconfig replaces client-go's "try setting KUBERNETES_MASTER" when
// there is no kubeconfig at all.
const noKubeconfig = "no kubeconfig: --kubeconfig not given, $KUBECONFIG not set, no ~/.kube/config, and not in a pod; " +
	"give --kubeconfig (on a control-plane node: --kubeconfig /etc/kubernetes/admin.conf)"

// restConfig is the REST config the flags name, with userAgent ("" keeps
// client-go's).
func (k *kubeconfigFlags) restConfig(userAgent string) (*rest.Config, error) {
	cfg, err := k.loader().ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, errors.New(noKubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig (--kubeconfig, --context): %w", err)
	}
	if userAgent != "" {
		cfg.UserAgent = userAgent
	}
	return cfg, nil
}

// client is the controller-runtime client of install and its helpers.
func (k *kubeconfigFlags) client() (client.Client, error) {
	cfg, err := k.restConfig(kube.InstallUserAgent)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
}

// target names the apiserver cfg reaches, the way the flags chose it: its
// URL, the context and the kubeconfig file.
func (k *kubeconfigFlags) target(cfg *rest.Config) string {
	raw, err := k.loader().RawConfig()
	if err != nil || len(raw.Contexts) == 0 {
		return cfg.Host + " (in-cluster config)"
	}
	name := k.context
	if name == "" {
		name = raw.CurrentContext
	}
	file := k.path
	if file == "" {
		file = strings.Join(clientcmd.NewDefaultClientConfigLoadingRules().GetLoadingPrecedence(), ":")
	}
	return fmt.Sprintf("%s (context %q, kubeconfig %s)", cfg.Host, name, file)
}

// reachTimeout bounds one attempt to reach the apiserver: one that drops
// packets would hold an attempt for the dialer's 30 s.
const reachTimeout = 5 * time.Second

// waitReachable waits, for at most timeout, until the apiserver of cfg
// answers (GET /version; any HTTP answer will do: the command's own calls
// tell a refusal). While it does not, it says so on errOut at once, with
// where and how long, and again every engine.ProgressInterval; giving up,
// the error points at --kubeconfig and --context. An error that waiting
// cannot mend (a certificate, an unknown host) ends the wait at once.
func (k *kubeconfigFlags) waitReachable(ctx context.Context, cfg *rest.Config, timeout time.Duration, errOut io.Writer) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	target := k.target(cfg)
	var mu sync.Mutex
	var last error
	stop := func() {}
	defer func() { stop() }()
	// An attempt gets ctx, not the poll's deadline: one cut short by the
	// deadline (or by the client's rate limiter foreseeing it) is no answer
	// to report; the poll ends the wait.
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		attempt, cancel := context.WithTimeout(ctx, reachTimeout)
		defer cancel()
		err := dc.RESTClient().Get().AbsPath("/version").Do(attempt).Error()
		var answer apierrors.APIStatus
		switch {
		case err == nil, !kubewait.APIServerAway(err) && errors.As(err, &answer):
			return true, nil
		case !kubewait.APIServerAway(err):
			return false, err
		}
		mu.Lock()
		first := last == nil
		last = err
		mu.Unlock()
		if first {
			fmt.Fprintf(errOut, "The apiserver at %s does not answer (%v); waiting up to %s (--timeout) for it\n", target, err, timeout)
			stop = engine.Heartbeat(engine.ProgressInterval, func(elapsed time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Fprintf(errOut, "Still waiting for the apiserver at %s: %s of %s (%v)\n", cfg.Host, elapsed, timeout, last)
			})
		}
		return false, nil
	})
	stop()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case !wait.Interrupted(err):
		return fmt.Errorf("the apiserver at %s: %w; check --kubeconfig and --context", target, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return fmt.Errorf("the apiserver at %s did not answer within %s (--timeout): %v; check --kubeconfig and --context", target, timeout, last)
}

// mustRegisterCompletion registers a flag's completions; it fails only on a
// flag that does not exist, a programming error.
func mustRegisterCompletion(cmd *cobra.Command, flag string, f cobra.CompletionFunc) {
	if err := cmd.RegisterFlagCompletionFunc(flag, f); err != nil {
		panic(err)
	}
}
