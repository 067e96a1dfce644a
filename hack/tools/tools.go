//go:build tools

// Package tools pins the Kubernetes binaries the test harnesses run: the
// envtest control plane (kube-apiserver) and the real kubeadm cluster
// (kubeadm, kubelet, the control-plane components, kube-proxy, kubectl).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
