package main

import (
	"fmt"
	"maps"
	"slices"

	"github.com/yurtdns/yurtdns/internal/install/kube"

	"github.com/spf13/cobra"
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

// restConfig is the REST config the flags name, with userAgent ("" keeps
// client-go's).
func (k *kubeconfigFlags) restConfig(userAgent string) (*rest.Config, error) {
	cfg, err := k.loader().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
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

// mustRegisterCompletion registers a flag's completions; it fails only on a
// flag that does not exist, a programming error.
func mustRegisterCompletion(cmd *cobra.Command, flag string, f cobra.CompletionFunc) {
	if err := cmd.RegisterFlagCompletionFunc(flag, f); err != nil {
		panic(err)
	}
}
