package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// What a control-plane node's health waits for is the mirror pods it has:
// kube-apiserver's and stacked etcd's, kube-apiserver's alone with external
// etcd, none for a node found by its label; each must be Ready.
func TestControlPlaneNodeHealth(t *testing.T) {
	mirror := func(component string, ready bool) client.Object {
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tunnelnodes.Namespace, Name: component + "-master-2"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}}
	}
	for _, tc := range []struct {
		name    string
		pods    []client.Object
		after   string // After's words, before the time
		waitErr string
	}{
		{"stacked etcd", []client.Object{mirror("kube-apiserver", true), mirror("etcd", true)}, "kube-apiserver serving, etcd healthy after ", ""},
		{"external etcd", []client.Object{mirror("kube-apiserver", true)}, "kube-apiserver serving after ", ""},
		{"no mirror pod", nil, "complete after 0s; no mirror pod kube-apiserver-master-2 or etcd-master-2 to wait for", ""},
		{"etcd not Ready", []client.Object{mirror("kube-apiserver", true), mirror("etcd", false)}, "",
			"kube-apiserver-master-2 and etcd-master-2 not Ready after 300ms (etcd-master-2 not Ready)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			env := &engine.Env{Client: fake.NewClientBuilder().WithObjects(tc.pods...).Build(), Options: engine.Options{Timeout: 300 * time.Millisecond}}
			h, err := ReadControlPlaneNodeHealth(ctx, env, "master-2")
			if err != nil {
				t.Fatal(err)
			}
			err = h.Wait(ctx, env)
			if tc.waitErr != "" {
				if err == nil || err.Error() != tc.waitErr {
					t.Errorf("wait: %v, want %q", err, tc.waitErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("wait: %v", err)
			}
			if got := h.After(40 * time.Millisecond); !strings.HasPrefix(got, tc.after) {
				t.Errorf("After = %q, want it to start %q", got, tc.after)
			}
		})
	}
}
