// Package version carries the yurtdns release, set at link time with
// -ldflags "-X github.com/yurtdns/yurtdns/internal/version.Version=v0.1.0"
// from the VERSION file at the repository's root (the Makefile does).
package version

import "golang.org/x/mod/semver"

// Version of the yurtdns binaries: a release's semantic version, or "dev"
// for a build without the Makefile's -ldflags.
var Version = "dev"

// Compare orders yurtdns versions a and b: -1 if a is older, 0 if the same,
// +1 if newer, by semantic versioning (a pre-release such as v0.2.0-rc.1
// is older than v0.2.0; build metadata after "+" is ignored). A string that
// is not a semantic version with its leading "v" ("dev", or a commit hash
// from before the VERSION file) is an unversioned build, older than every
// release: an install by one is always upgraded. Two unversioned builds
// compare equal, as nothing orders them.
func Compare(a, b string) int {
	// semver.Compare orders every invalid version before every valid one,
	// and the invalid ones as equal: exactly the rule above.
	return semver.Compare(a, b)
}
