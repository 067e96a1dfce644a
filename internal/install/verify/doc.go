// Package verify is status --verify-dns (every node name resolved at a DNS
// server, compared with the layout's rules) and
// --verify-dns-from-control-plane (the same from each control-plane node,
// in a Job there, with kube-apiserver's own resolver settings).
package verify
