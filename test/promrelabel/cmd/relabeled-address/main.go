// Command relabeled-address prints, for each endpoint of the ServiceMonitor
// on stdin (YAML or JSON, e.g. kubectl get servicemonitor -o json), the
// address Prometheus scrapes for a target with the discovery labels given as
// arguments (NAME=VALUE ...): for tests in the main module, which cannot
// import Prometheus (go -C test/promrelabel run ./cmd/relabeled-address ...).
//
// Output: one line per endpoint, "INDEX ADDRESS", or "INDEX dropped".
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/yurtdns/yurtdns/test/promrelabel"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Stdin, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "relabeled-address:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, args []string) error {
	discovered := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return fmt.Errorf("argument %q: want LABEL=VALUE", a)
		}
		discovered[k] = v
	}
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	sm := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &sm.Object); err != nil {
		return fmt.Errorf("reading the ServiceMonitor: %w", err)
	}
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if err != nil {
		return err
	}
	for i, e := range endpoints {
		m, ok := e.(map[string]any)
		if !ok {
			return fmt.Errorf("endpoint %d is not an object", i)
		}
		addr, kept, err := promrelabel.Address(m, discovered)
		if err != nil {
			return fmt.Errorf("endpoint %d: %w", i, err)
		}
		if !kept {
			addr = "dropped"
		}
		fmt.Fprintf(out, "%d %s\n", i, addr)
	}
	return nil
}
