//go:build tools

// Package tools pins the Kubernetes v1.36 binaries the real kubeadm cluster
// starts from before TestKubeadmUpgrade moves it to v1.37 (../tools.go's):
// kubeadm, the kubelet, the control-plane components and kube-proxy.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
