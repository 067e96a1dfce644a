// Package kubeproxyconf edits kube-proxy's config.conf (a
// KubeProxyConfiguration) line by line, so that revert restores the text
// byte for byte.
package kubeproxyconf
