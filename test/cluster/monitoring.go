package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/yurtdns/yurtdns/internal/image"
)

// The monitoring stack's images (issue 49), under upstream's references.
// prometheus-operator v0.85.0 runs the config reloader from its own
// version's image, with command /bin/prometheus-config-reloader; its default
// Prometheus is v3.5.0, so a Prometheus resource names version v3.16.0.
const (
	PrometheusImage               = "quay.io/prometheus/prometheus:v3.16.0"
	PrometheusOperatorImage       = "quay.io/prometheus-operator/prometheus-operator:v0.85.0"
	PrometheusConfigReloaderImage = "quay.io/prometheus-operator/prometheus-config-reloader:v0.85.0"
	NodeExporterImage             = "quay.io/prometheus/node-exporter:v1.12.1"
)

// monitoringImages are the monitoring images with the binary make monitoring
// built for each and where upstream's image has it. Upstream's images run
// as nobody; the operator's Prometheus pods keep the image's user and mount
// their storage at /prometheus, which they pass as --storage.tsdb.path.
var monitoringImages = []struct{ ref, binary, entrypoint string }{
	{PrometheusImage, "prometheus", "/bin/prometheus"},
	{PrometheusOperatorImage, "prometheus-operator", "/bin/operator"},
	{PrometheusConfigReloaderImage, "prometheus-config-reloader", "/bin/prometheus-config-reloader"},
	{NodeExporterImage, "node_exporter", "/bin/node_exporter"},
}

// nobody is the user of upstream's busybox-based images.
const nobody = "65534:65534"

// ImportMonitoringImages imports the monitoring images on every node, made
// from make monitoring's binaries with the project's image code. Only the
// monitoring test runs them, so it imports them, not the cluster's start.
// A binary that does not print its image's version is refused.
func (c *Cluster) ImportMonitoringImages() error {
	var archives []string
	for _, m := range monitoringImages {
		bin := c.bin(m.binary)
		if err := checkBinaryVersion(bin, m.ref); err != nil {
			return err
		}
		archive, err := c.imageArchive(m.ref, image.Spec{Binary: bin, Entrypoint: m.entrypoint, User: nobody, CACertificates: "/etc/ssl/certs/ca-certificates.crt"})
		if err != nil {
			return err
		}
		archives = append(archives, archive)
	}
	return c.importImages(archives...)
}

// PrometheusOperatorCRDs is the directory of prometheus-operator v0.85.0's
// CRDs, which make monitoring copies: apply it with --server-side (the
// largest CRDs exceed client-side apply's annotation).
func (c *Cluster) PrometheusOperatorCRDs() string {
	return filepath.Join(c.binDir, "prometheus-operator-crds")
}

// checkBinaryVersion runs bin --version and wants the version of ref's tag,
// as the Prometheus projects print it: "version 3.16.0 (...".
func checkBinaryVersion(bin, ref string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w: make monitoring builds it", err)
	}
	version := strings.TrimPrefix(ref[strings.LastIndexByte(ref, ':')+1:], "v")
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %v: %s", bin, err, out)
	}
	if !strings.Contains(string(out), "version "+version+" ") {
		return fmt.Errorf("%s is not version %s, the image %s: it prints %q", bin, version, ref, out)
	}
	return nil
}
