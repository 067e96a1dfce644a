package nodelocal

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestAddresses(t *testing.T) {
	for _, tc := range []struct {
		families []corev1.IPFamily
		want     []string
	}{
		{nil, nil},
		{[]corev1.IPFamily{corev1.IPv4Protocol}, []string{"169.254.20.10"}},
		{[]corev1.IPFamily{corev1.IPv6Protocol}, []string{"fd84:5bd1:ae3::10"}},
		{[]corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, []string{"169.254.20.10", "fd84:5bd1:ae3::10"}},
		{[]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, []string{"fd84:5bd1:ae3::10", "169.254.20.10"}},
		{[]corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol, "IPv5"}, []string{"169.254.20.10"}},
	} {
		if got := Strings(Addresses(tc.families)); !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 {
			t.Errorf("Addresses(%v) = %v, want %v", tc.families, got, tc.want)
		}
	}
	if !Address6.Is6() || Address6.Is4In6() || !Address6.IsPrivate() {
		t.Errorf("Address6 %s is not a unique local IPv6 address", Address6)
	}
}

// A node switched to the IPv4 address alone and switched again to both
// keeps its original backup; a file that is not switched writes it anew.
func TestKeepBackup(t *testing.T) {
	dir := t.TempDir()
	files := NewKubeletFiles(dir)
	if keep, err := keepBackup(files.Backup, []string{"169.254.20.10"}); err != nil || keep {
		t.Errorf("no backup: keep %v, %v", keep, err)
	}
	if err := writeAtomic(files.Backup, []byte("original")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dns  []string
		keep bool
	}{
		{[]string{"169.254.20.10"}, true},
		{[]string{"169.254.20.10", "fd84:5bd1:ae3::10"}, true},
		{[]string{"10.96.0.10"}, false},
		{[]string{"169.254.20.10", "10.96.0.10"}, false},
		{nil, false},
	} {
		if keep, err := keepBackup(files.Backup, tc.dns); err != nil || keep != tc.keep {
			t.Errorf("clusterDNS %v: keep %v, %v; want %v", tc.dns, keep, err, tc.keep)
		}
	}
}
