// Package kube is what install's steps do to Kubernetes objects, each
// recorded in the step's state: create and delete what install made
// (objects.go), change one value and restore it (fieldedit.go), wait until
// workloads serve (wait.go), move kube-dns's traffic from one set of pods
// to another without losing a query (drain.go, handover.go), run a Job on
// one node (hostjob.go) and follow it to the end (jobs.go), and harden pod
// templates (securitycontext.go).
package kube
