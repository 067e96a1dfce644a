package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A state written before the records were typed (the control-plane step's
// directories and Jobs in before/after strings) is read into the typed
// fields, so revert restores what an older install did.
func TestLoadStateReadsThePreviousFormat(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: StateConfigMap}, Data: map[string]string{
		"control-plane": `{"applied":true,"records":{"manifests":{"before":"/etc/kubernetes/manifests","after":"/etc/kubernetes/yurtdns-backup"}}}`,
		"sync":          `{"applied":false,"records":{"jobs":{"after":"master-1,master-2"},"jobs image":{"after":"example/sync:v1"},"Job kube-system/j":{"created":true}}}`,
		"kube-proxy":    `{"applied":true,"records":{"ConfigMap kube-system/kube-proxy config.conf":{"before":"a","after":"b","restoring":true}}}`,
	}}
	env := &Env{Client: fake.NewClientBuilder().WithObjects(cm).Build()}
	st, err := loadState(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.step("control-plane").Records[ManifestsRecordKey].Manifests; m == nil || m.Dir != "/etc/kubernetes/manifests" || m.BackupDir != "/etc/kubernetes/yurtdns-backup" {
		t.Errorf("manifests record: %+v", m)
	}
	jobs := st.step("sync").Records
	if j := jobs[JobsRecordKey].Jobs; j == nil || !slices.Equal(j.Nodes, []string{"master-1", "master-2"}) || j.Image != "example/sync:v1" {
		t.Errorf("jobs record: %+v", j)
	}
	if _, ok := jobs[legacyJobImageKey]; ok || !jobs["Job kube-system/j"].Created || len(jobs) != 2 {
		t.Errorf("records after the upgrade: %+v", jobs)
	}
	if rec := st.step("kube-proxy").Records["ConfigMap kube-system/kube-proxy config.conf"]; rec.Before != "a" || rec.After != "b" || !rec.Restoring {
		t.Errorf("value record: %+v", rec)
	}
}

// The state records the profile install ran with, also on a state written
// before it was recorded.
func TestSaveRecordsTheProfile(t *testing.T) {
	legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: StateConfigMap},
		Data: map[string]string{"raven-rbac": `{"applied":true}`}}
	for _, existing := range []*corev1.ConfigMap{nil, legacy} {
		b := fake.NewClientBuilder()
		if existing != nil {
			b = b.WithObjects(existing.DeepCopy())
		}
		env := &Env{Client: b.Build(), Options: Options{Profile: "raven", Timeout: time.Second}}
		ctx := context.Background()
		st, err := loadState(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		st.step("records").Applied = true
		if err := st.persist(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := RecordedProfile(ctx, env); err != nil || got != "raven" {
			t.Errorf("state existing before: %v: recorded profile %q (%v), want raven", existing != nil, got, err)
		}
	}
}
