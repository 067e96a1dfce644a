// Command image writes an OCI image tarball for one yurtdns binary (make
// image): an image index with one image per platform, each from that
// platform's build of the binary.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/yurtdns/yurtdns/internal/image"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	var platforms []v1.Platform
	var binaries []string
	flag.Func("binary", "PLATFORM=PATH: the static binary built for PLATFORM (os/arch[/variant]); once per platform", func(v string) error {
		platform, path, ok := strings.Cut(v, "=")
		if !ok || path == "" {
			return fmt.Errorf("want PLATFORM=PATH, e.g. linux/arm64=bin/linux_arm64/coredns-yurt")
		}
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return err
		}
		platforms, binaries = append(platforms, *p), append(binaries, path)
		return nil
	})
	entrypoint := flag.String("entrypoint", "", "path of the binary in the image, e.g. /coredns")
	ports := flag.String("ports", "", "exposed ports, comma separated, e.g. 53/udp,53/tcp,9153/tcp")
	ref := flag.String("ref", "", "image reference recorded in the archive, fully qualified, e.g. docker.io/yurtdns/coredns-yurt:v0.1.0")
	out := flag.String("out", "", "output tar file")
	bindLowPorts := flag.Bool("bind-low-ports", false, "give the binary cap_net_bind_service=+ep (file capability) for ports below 1024")
	certs := flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to include")
	flag.Parse()
	if len(binaries) == 0 || *entrypoint == "" || *ref == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: image --binary PLATFORM=BIN [--binary ...] --entrypoint /PATH --ref NAME:TAG --out FILE.tar [--ports P,...]")
		os.Exit(2)
	}
	var imgs []v1.Image
	for i, bin := range binaries {
		spec := image.Spec{Binary: bin, Entrypoint: *entrypoint, CACertificates: *certs, BindLowPorts: *bindLowPorts, Platform: platforms[i]}
		if *ports != "" {
			spec.Ports = strings.Split(*ports, ",")
		}
		img, err := image.Build(spec)
		if err != nil {
			fmt.Fprintln(os.Stderr, "image:", err)
			os.Exit(1)
		}
		imgs = append(imgs, img)
	}
	if err := image.WriteOCIIndexArchive(*out, *ref, imgs); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %s, %d platforms\n", *out, *ref, len(imgs))
}
