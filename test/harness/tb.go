package harness

// TB is the part of testing.TB the harness uses. Tests pass their
// *testing.T or *testing.B; the demo (test/demo) passes its own, so that it
// runs the very same control plane, fixtures and binaries as the tests.
type TB interface {
	Helper()
	Cleanup(func())
	TempDir() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
}
