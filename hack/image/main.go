// Command image writes an OCI image tarball for one yurtdns binary (make image).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/yurtdns/yurtdns/internal/image"
)

func main() {
	binary := flag.String("binary", "", "static binary to package")
	entrypoint := flag.String("entrypoint", "", "path of the binary in the image, e.g. /coredns")
	ports := flag.String("ports", "", "exposed ports, comma separated, e.g. 53/udp,53/tcp,9153/tcp")
	ref := flag.String("ref", "", "image reference recorded in the archive, fully qualified, e.g. docker.io/yurtdns/coredns-yurt:v0.1.0")
	out := flag.String("out", "", "output tar file")
	bindLowPorts := flag.Bool("bind-low-ports", false, "give the binary cap_net_bind_service=+ep (file capability) for ports below 1024")
	certs := flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to include")
	flag.Parse()
	if *binary == "" || *entrypoint == "" || *ref == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: image --binary BIN --entrypoint /PATH --ref NAME:TAG --out FILE.tar [--ports P,...]")
		os.Exit(2)
	}
	spec := image.Spec{Binary: *binary, Entrypoint: *entrypoint, CACertificates: *certs, BindLowPorts: *bindLowPorts}
	if *ports != "" {
		spec.Ports = strings.Split(*ports, ",")
	}
	img, err := image.Build(spec)
	if err == nil {
		err = image.WriteOCIArchive(*out, *ref, img)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	digest, _ := img.Digest()
	fmt.Printf("%s: %s %s\n", *out, *ref, digest)
}
