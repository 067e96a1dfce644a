package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/yurtdns/yurtdns/internal/kubewait"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StateConfigMap records what install changed, so revert restores exactly
// that and a re-run after an interruption carries on.
const StateConfigMap = "yurtdns-install-state"

// ManagedByLabel marks objects install created.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// ProfileAnnotation on the state ConfigMap names the --profile install ran
// with, so that status, revert and a later install need not be told again.
const ProfileAnnotation = "yurtdns.io/profile"

// VersionAnnotation on the state ConfigMap is the yurtdns version whose
// install last ran to the end (absent: one from before v0.1.0, which did
// not record it). An older binary refuses to install over it.
const VersionAnnotation = "yurtdns.io/version"

// Record is one change a step made, under a key naming what changed: an
// object install created (kube.ObjectKey), a value it edited (kube.FieldEdit.Key), or
// the control-plane step's manifests or Jobs (ManifestsRecordKey,
// JobsRecordKey). Exactly one kind of its fields is set.
type Record struct {
	// Created: the object did not exist; revert deletes it.
	Created bool `json:"created,omitempty"`

	// A value edit. Before is the value before install; BeforeAbsent when
	// there was none.
	Before       string `json:"before,omitempty"`
	BeforeAbsent bool   `json:"beforeAbsent,omitempty"`
	// After is the value install wrote: revert restores Before only while
	// the value is still this, leaving a user's later change alone.
	After string `json:"after,omitempty"`
	// Restoring: a revert is writing Before back (saved before the write),
	// so a revert interrupted after it knows the action after the write
	// (kube-proxy's restart) may still be due.
	Restoring bool `json:"restoring,omitempty"`

	// Manifests: the static pod manifests patched in a local directory.
	Manifests *ManifestsRecord `json:"manifests,omitempty"`
	// Jobs: patch Jobs ran (or may have run) on the control-plane nodes.
	Jobs *JobsRecord `json:"jobs,omitempty"`
	// Kubelet: a node's kubelet was (or may have been) switched to the
	// node-local cache.
	Kubelet *KubeletRecord `json:"kubelet,omitempty"`
}

// ManifestsRecord is where the control-plane step patched manifests and
// kept their originals.
type ManifestsRecord struct {
	Dir       string `json:"dir"`
	BackupDir string `json:"backupDir"`
	// KubeadmPatchesDir holds install's kubeadm patch.
	KubeadmPatchesDir string `json:"kubeadmPatchesDir,omitempty"`
	// Node runs the manifests (--node-name): revert waits for its mirror
	// pods. Absent from an older install's state: revert takes this host's name.
	Node string `json:"node,omitempty"`
}

// JobsRecord is what the control-plane step's patch Jobs ran on.
type JobsRecord struct {
	Nodes []string `json:"nodes"`
	// Image is the image they ran: one the cluster has, for the restore Jobs.
	Image string `json:"image,omitempty"`
	// KubeadmPatchesDir is where they put install's kubeadm patch, on each node.
	KubeadmPatchesDir string `json:"kubeadmPatchesDir,omitempty"`
}

// The keys of the control-plane step's records.
const (
	ManifestsRecordKey = "manifests"
	JobsRecordKey      = "jobs"
)

// StepState is what one step recorded.
type StepState struct {
	Applied bool `json:"applied"`
	// Skipped, when the step is not applied, is what applies it (the
	// Result's ApplyWith): the last install skipped it.
	Skipped string            `json:"skipped,omitempty"`
	Records map[string]Record `json:"records,omitempty"`
	// persist saves the whole state; steps call it before each write.
	Persist func(context.Context) error `json:"-"`
	// doing, set while the runner runs the step, takes what Doing says.
	doing func(what string)
}

// Doing says what a long step is at now ("patch Job on master-2"): its
// progress lines name it after the time.
func (s *StepState) Doing(what string) {
	if s.doing != nil {
		s.doing(what)
	}
}

// state is the whole state ConfigMap, one JSON value per step.
type state struct {
	steps map[string]*StepState
	// version is VersionAnnotation's value, "" when absent.
	version string
	cm      *corev1.ConfigMap
	persist func(context.Context) error
}

// step is the named step's state, empty when it recorded nothing.
func (s *state) step(name string) *StepState {
	st, ok := s.steps[name]
	if !ok {
		st = &StepState{Persist: s.persist}
		s.steps[name] = st
	}
	if st.Records == nil {
		st.Records = map[string]Record{}
	}
	return st
}

// loadState reads the state and binds it to env: a save waits out an
// apiserver that is away (the control-plane step restarts it) for up to
// --timeout; a dry run saves nothing.
func loadState(ctx context.Context, env *Env) (*state, error) {
	s := &state{steps: map[string]*StepState{}}
	s.persist = func(ctx context.Context) error {
		if env.Options.DryRun {
			return nil
		}
		return kubewait.RetryWhileAway(ctx, env.Options.Timeout, "saving install state", func(ctx context.Context) error { return s.save(ctx, env) })
	}
	cm, err := readState(ctx, env)
	if cm == nil || err != nil {
		return s, err
	}
	s.cm = cm
	s.version = cm.Annotations[VersionAnnotation]
	for name, data := range cm.Data {
		st := &StepState{Persist: s.persist}
		if err := json.Unmarshal([]byte(data), st); err != nil {
			return nil, fmt.Errorf("install state for step %s is corrupt: %w", name, err)
		}
		st.upgradeLegacy()
		s.steps[name] = st
	}
	return s, nil
}

// readState is the state ConfigMap, nil when there is none. It is the
// first call of install, revert and status: an apiserver that a killed
// install restarted is waited out for up to --timeout, as the saves are.
func readState(ctx context.Context, env *Env) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	// The error names what it was reading.
	err := kubewait.RetryWhileAway(ctx, env.Options.Timeout, "reading install state", func(ctx context.Context) error {
		return client.IgnoreNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: tunnelnodes.Namespace, Name: StateConfigMap}, cm))
	})
	if err != nil {
		return nil, err
	}
	if cm.Name == "" {
		return nil, nil
	}
	return cm, nil
}

// RecordedProfile is the --profile the install state records, "" when
// there is no state or an install before the profile was recorded wrote it.
func RecordedProfile(ctx context.Context, env *Env) (string, error) {
	cm, err := readState(ctx, env)
	if cm == nil || err != nil {
		return "", err
	}
	return cm.Annotations[ProfileAnnotation], nil
}

// RecordedVersion is the yurtdns version the install state records
// (VersionAnnotation); exists is false when there is no state.
func RecordedVersion(ctx context.Context, env *Env) (v string, exists bool, err error) {
	cm, err := readState(ctx, env)
	if cm == nil || err != nil {
		return "", false, err
	}
	return cm.Annotations[VersionAnnotation], true, nil
}

// save writes the state after each step, so an interrupted install knows
// what it already did.
func (s *state) save(ctx context.Context, env *Env) error {
	c := env.Client
	data := map[string]string{}
	for name, st := range s.steps {
		if !st.Applied && len(st.Records) == 0 && st.Skipped == "" {
			continue // a step that did nothing (not requested) holds nothing to undo or to report
		}
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		data[name] = string(b)
	}
	if s.cm == nil {
		s.cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: StateConfigMap,
			Labels:      map[string]string{ManagedByLabel: "yurtdns"},
			Annotations: map[string]string{ProfileAnnotation: env.Options.Profile}}, Data: data}
		return c.Create(ctx, s.cm)
	}
	s.cm.Data = data
	// A state an install before the profile was recorded wrote gets it now.
	metav1.SetMetaDataAnnotation(&s.cm.ObjectMeta, ProfileAnnotation, env.Options.Profile)
	if s.version != "" {
		metav1.SetMetaDataAnnotation(&s.cm.ObjectMeta, VersionAnnotation, s.version)
	}
	return c.Update(ctx, s.cm)
}

// KubeletRecord is one node the step changed: the image its Jobs run (one
// the cluster has) and when the kubelet began and stopped giving new pods
// the node-local address (pods created in between resolve there). Without
// Since the node only ran a cache (never switched): revert still tears
// down its address.
type KubeletRecord struct {
	Node  string `json:"node"`
	Image string `json:"image"`
	// Addresses are the node-local addresses the node's cache was set up
	// with, the kubelet's clusterDNS while switched (none: an earlier
	// install's, 169.254.20.10 alone).
	Addresses []string     `json:"addresses,omitempty"`
	Since     *metav1.Time `json:"since,omitempty"`
	Until     *metav1.Time `json:"until,omitempty"`
}

// JobImage is the image the node's revert Jobs run: the one install ran
// there, unless --sync-image names another.
func (r *KubeletRecord) JobImage(o Options) string {
	if o.SyncImage != "" {
		return o.SyncImage
	}
	return r.Image
}
