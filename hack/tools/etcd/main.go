// Command etcd is the etcd server, built from the Go module proxy so the test
// harness needs no downloaded release binaries.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
