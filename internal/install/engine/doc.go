// Package engine runs install's steps as kubeadm's phases/workflow runs its
// phases. A Step is named, idempotent and reversible; a Runner installs a
// layout's steps in order, reverts them backwards and reports their status.
// What a step changes is recorded, before it writes, in the state ConfigMap
// (state.go), so that revert restores exactly that and an interrupted run
// carries on. Every "until live" wait goes through WaitFor (wait.go): the
// apiserver may restart under any step.
package engine
