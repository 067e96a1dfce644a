// Package version carries the yurtdns release, set at link time with
// -ldflags "-X github.com/yurtdns/yurtdns/internal/version.Version=v0.1.0".
package version

// Version of the yurtdns binaries.
var Version = "dev"
