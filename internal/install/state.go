package install

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StateConfigMap records what install changed, so revert restores exactly
// that and a re-run after an interruption carries on.
const StateConfigMap = "yurtdns-install-state"

// ManagedByLabel marks objects install created.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// record is one change a step made.
type record struct {
	// Created: the object did not exist; revert deletes it.
	Created bool `json:"created,omitempty"`
	// Before is the value before install; BeforeAbsent when there was none.
	Before       string `json:"before,omitempty"`
	BeforeAbsent bool   `json:"beforeAbsent,omitempty"`
	// After is the value install wrote: revert restores Before only while
	// the value is still this, leaving a user's later change alone.
	After string `json:"after,omitempty"`
	// Restoring: a revert is writing Before back (saved before the write),
	// so a revert interrupted after it knows the action after the write
	// (kube-proxy's restart) may still be due.
	Restoring bool `json:"restoring,omitempty"`
}

// stepState is what one step recorded.
type stepState struct {
	Applied bool              `json:"applied"`
	Records map[string]record `json:"records,omitempty"`
	// persist saves the whole state; steps call it before each write.
	persist func(context.Context) error
}

// state is the whole state ConfigMap, one JSON value per step.
type state struct {
	steps   map[string]*stepState
	cm      *corev1.ConfigMap
	persist func(context.Context) error
}

func (s *state) step(name string) *stepState {
	st, ok := s.steps[name]
	if !ok {
		st = &stepState{Records: map[string]record{}}
		s.steps[name] = st
	}
	if st.Records == nil {
		st.Records = map[string]record{}
	}
	st.persist = s.persist
	return st
}

func loadState(ctx context.Context, c client.Client) (*state, error) {
	s := &state{steps: map[string]*stepState{}}
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: tunnelnodes.Namespace, Name: StateConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading install state: %w", err)
	}
	s.cm = cm
	for name, data := range cm.Data {
		st := &stepState{}
		if err := json.Unmarshal([]byte(data), st); err != nil {
			return nil, fmt.Errorf("install state for step %s is corrupt: %w", name, err)
		}
		s.steps[name] = st
	}
	return s, nil
}

// bind gives the steps a way to save the state; a dry run saves nothing.
// A save waits out an apiserver that is away (the control-plane step
// restarts it) for up to timeout.
func (s *state) bind(c client.Client, dryRun bool, timeout time.Duration) {
	s.persist = func(ctx context.Context) error {
		if dryRun {
			return nil
		}
		return retryWhileAway(ctx, timeout, "saving install state", func(ctx context.Context) error { return s.save(ctx, c) })
	}
}

// save writes the state after each step, so an interrupted install knows
// what it already did.
func (s *state) save(ctx context.Context, c client.Client) error {
	data := map[string]string{}
	for name, st := range s.steps {
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		data[name] = string(b)
	}
	if s.cm == nil {
		s.cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: StateConfigMap,
			Labels: map[string]string{ManagedByLabel: "yurtdns"}}, Data: data}
		if err := c.Create(ctx, s.cm); err != nil {
			return fmt.Errorf("saving install state: %w", err)
		}
		return nil
	}
	s.cm.Data = data
	if err := c.Update(ctx, s.cm); err != nil {
		return fmt.Errorf("saving install state: %w", err)
	}
	return nil
}
