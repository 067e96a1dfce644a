// Command release writes the manifests of a yurtdns release (make release):
// each of deploy/'s kustomizations rendered as `kubectl apply -k` renders
// it, with yurtdns's images set to the release's, as one multi-document
// YAML file that a user applies with `kubectl apply -f`.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/yurtdns/yurtdns/deploy"

	"golang.org/x/mod/semver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// kustomizations are the ones a user applies on their own, each written to
// its directory's name with "/" as "-" (raven/tunnel-nodes-sync is
// raven-tunnel-nodes-sync.yaml). deploy.CoreDNSRBAC is part of
// coredns-yurt; the sidecar component goes into a user's own kustomization,
// from the repository at the release's tag.
var kustomizations = []string{
	deploy.Records,
	deploy.TunnelNodesSync,
	deploy.CoreDNSYurt,
	deploy.NodeLocalDNS,
	deploy.NodeLocalDNSLeftover,
	deploy.TunnelNodesSyncRaven,
	deploy.RavenProxyDNSRBAC,
	deploy.Monitoring,
	deploy.MonitoringRaven,
	deploy.MonitoringSidecar,
}

// repositories are yurtdns's images, which deploy/ pins at the VERSION file
// and make image writes at $(VERSION), which `make VERSION=...` may override.
var repositories = []string{"docker.io/yurtdns/coredns-yurt", "docker.io/yurtdns/tunnel-nodes-sync"}

func main() {
	version := flag.String("version", "", "the release, vMAJOR.MINOR.PATCH[-PRERELEASE] (the VERSION file)")
	out := flag.String("out", "", "directory to write the manifests to")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "usage: release --version vX.Y.Z --out DIR")
		os.Exit(2)
	}
	if err := write(*out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// write renders every kustomization at version into dir.
func write(dir, version string) error {
	// Canonical, so that the image tags and --version read exactly as the
	// release is named (no v0.1 for v0.1.0, no +build).
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("version %q is not a release: want vMAJOR.MINOR.PATCH[-PRERELEASE] in the VERSION file", version)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, k := range kustomizations {
		data, err := render(k, version)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, manifestFile(k)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func manifestFile(kustomization string) string {
	return strings.ReplaceAll(kustomization, "/", "-") + ".yaml"
}

// render is kustomization dir as YAML documents, with yurtdns's images at
// version.
func render(dir, version string) ([]byte, error) {
	objs, err := deploy.Render(dir)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# yurtdns %s: deploy/%s, for kubectl apply -f.\n", version, dir)
	for _, o := range objs {
		if err := setImages(o, version); err != nil {
			return nil, err
		}
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes(), nil
}

// setImages tags yurtdns's images in o's pod template with version.
func setImages(o *unstructured.Unstructured, version string) error {
	for _, field := range []string{"initContainers", "containers"} {
		path := []string{"spec", "template", "spec", field}
		containers, found, err := unstructured.NestedSlice(o.Object, path...)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		for _, c := range containers {
			c := c.(map[string]any)
			image, _ := c["image"].(string)
			if repo := repository(image); slices.Contains(repositories, repo) {
				c["image"] = repo + ":" + version
			}
		}
		if err := unstructured.SetNestedSlice(o.Object, containers, path...); err != nil {
			return err
		}
	}
	return nil
}

// repository is image without its tag.
func repository(image string) string {
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		return image[:i]
	}
	return image
}
