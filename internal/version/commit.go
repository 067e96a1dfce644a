package version

import "runtime/debug"

// Commit is the git commit of the build: set with -ldflags "-X
// github.com/yurtdns/yurtdns/internal/version.Commit=..." (the Makefile
// does), else the one Go stamped into the binary, else "unknown".
var Commit = ""

// BuildCommit is Commit, or what the build info says when it is unset.
func BuildCommit() string {
	if Commit != "" {
		return Commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" && modified == "true" {
			return rev + "-dirty"
		}
		if rev != "" {
			return rev
		}
	}
	return "unknown"
}
