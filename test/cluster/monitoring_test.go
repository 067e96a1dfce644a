package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/yurtdns/yurtdns/test/harness"
)

// TestMonitoringBinaryVersions runs each binary make monitoring built as
// ImportMonitoringImages does before it tags an image: each prints its
// image's version, and is refused under another tag, so a version bumped
// in the Makefile but not in the image references fails here, before a
// cluster is made.
func TestMonitoringBinaryVersions(t *testing.T) {
	dir, err := harness.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range monitoringImages {
		t.Run(m.binary, func(t *testing.T) {
			bin := filepath.Join(dir, m.binary)
			if _, err := os.Stat(bin); err != nil {
				t.Skipf("%v: make monitoring builds it", err)
			}
			if err := checkBinaryVersion(bin, m.ref); err != nil {
				t.Error(err)
			}
			// Neither a shorter version nor a pre-release of it is taken.
			for _, other := range []string{m.ref[:len(m.ref)-2], m.ref + "-rc.0"} {
				if err := checkBinaryVersion(bin, other); err == nil {
					t.Errorf("%s taken for %s", bin, other)
				}
			}
		})
	}
}
