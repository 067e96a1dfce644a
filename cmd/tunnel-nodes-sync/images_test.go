package main

import (
	"os"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/version"
)

// TestDefaultImagesAreWhatMakeImageWrites: install's default images are the
// fully qualified references `make image` writes for this build's version,
// so that `ctr -n k8s.io images import` followed by the kubelet finds them.
func TestDefaultImagesAreWhatMakeImageWrites(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	cmd := newInstallCommand()
	for flag, name := range map[string]string{"coredns-image": "coredns-yurt", "sync-image": "tunnel-nodes-sync"} {
		def := cmd.Flags().Lookup(flag).DefValue
		if want := "docker.io/yurtdns/" + name + ":" + version.Version; def != want {
			t.Errorf("--%s defaults to %q, want %q", flag, def, want)
		}
		if made := "--ref docker.io/yurtdns/" + name + ":$(VERSION)"; !strings.Contains(string(makefile), made) {
			t.Errorf("make image does not write %s", made)
		}
	}
}
