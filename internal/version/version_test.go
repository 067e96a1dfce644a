package version

import "testing"

func TestCompare(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"v0.1.0", "v0.1.0", 0},
		{"v0.1.0", "v0.2.0", -1},
		{"v0.10.0", "v0.9.0", 1}, // numerically, not as strings
		{"v1.0.0", "v0.99.99", 1},
		{"v0.2.0-rc.1", "v0.2.0", -1},
		{"v0.2.0-rc.1", "v0.1.0", 1},
		{"v0.1.0+build.7", "v0.1.0", 0},
		// Unversioned builds: older than any release, equal to each other.
		{"dev", "v0.1.0", -1},
		{"v0.1.0", "dev", 1},
		{"5fa42d7-dirty", "v0.0.1", -1},
		{"", "v0.1.0", -1},
		{"0.1.0", "v0.1.0", -1}, // without its "v", not a release
		{"dev", "5fa42d7", 0},
		{"dev", "dev", 0},
	} {
		if got := Compare(tt.a, tt.b); got != tt.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
