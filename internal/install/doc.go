// Package install is `tunnel-nodes-sync install`, `revert` and `status`:
// it looks --profile's layout up (internal/layout), takes that layout's
// steps (steps/plan.go) and runs them with the engine, in the manner of
// kubeadm's phases. What lives where:
//
//	engine/   Env, Step, the Runner (install in order, revert backwards, status),
//	          the state ConfigMap, WaitFor
//	kube/     what steps do to objects: create and delete what install made, one
//	          value changed and restored (FieldEdit), waits until pods serve, the
//	          kube-dns hand-off, per-node Jobs and their lifecycle, security contexts
//	steps/    one file per step, plan.go the only ordered list per layout and the
//	          opt-in steps
//	verify/   status --verify-dns and --verify-dns-from-control-plane
//
// The editors the steps use are packages of their own, with no Kubernetes
// client: internal/corefile, internal/staticpod, internal/kubeproxyconf.
package install
