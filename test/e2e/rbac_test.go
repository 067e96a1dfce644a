package e2e

import (
	"testing"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/test/harness"
)

// TestDeployManifestsDryRun: every kustomization under deploy/ is accepted
// by the apiserver (server-side apply, dry run: validation and admission).
// What the applied RBAC allows and refuses, and the binaries working with
// exactly those permissions, is TestLeastPrivilege (leastprivilege_test.go).
func TestDeployManifestsDryRun(t *testing.T) {
	t.Parallel()
	cp := harness.Start(t, harness.Options{})
	for _, dir := range deploy.Dirs {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		cp.Apply(t, objs, true)
	}
}
