package yurthosts

import (
	"fmt"
	"strings"
	"testing"

	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
)

func recordsCM(text string) *corev1.ConfigMap {
	return &corev1.ConfigMap{Data: map[string]string{tunnelnodes.ConfigMapKey: text}}
}

// TestBuildBadInput: malformed content is counted once per content,
// and a value over 1 MiB is rejected whole, keeping the last good records.
func TestBuildBadInput(t *testing.T) {
	w := newWatcher(source{configMapNamespace: "test", configMapName: "bad-input", configMapKey: tunnelnodes.ConfigMapKey}, nil, nil)
	errs := parseErrors.WithLabelValues("test/bad-input")

	recs := w.build(recordsCM("10.0.0.1 good\nnot-an-ip x\n10.0.0.2 bad/name"), nil)
	if recs.names != 1 || testutil.ToFloat64(errs) != 2 {
		t.Fatalf("names %v, parse errors %v", recs.names, testutil.ToFloat64(errs))
	}
	// The same content again (a Service event, a resync) counts nothing more.
	w.build(recordsCM("10.0.0.1 good\nnot-an-ip x\n10.0.0.2 bad/name"), nil)
	if testutil.ToFloat64(errs) != 2 {
		t.Errorf("parse errors counted twice for one content: %v", testutil.ToFloat64(errs))
	}

	huge := strings.Repeat("10.0.0.3 n\n", tunnelnodes.MaxHostsBytes/11+1)
	recs = w.build(recordsCM(huge), nil)
	if _, ok := recs.host("good."); recs.names != 1 || !ok {
		t.Errorf("oversized value replaced the records: %d names", recs.names)
	}
	if testutil.ToFloat64(errs) != 3 {
		t.Errorf("oversized value not counted: %v", testutil.ToFloat64(errs))
	}

	// Binary garbage is skipped line by line, never a panic.
	recs = w.build(recordsCM("\x00\xff\xfe 1.2.3.4\r\n1.2.3.4\x00 x\n10.0.0.4 ok"), nil)
	if _, ok := recs.host("ok."); recs.names != 1 || !ok {
		t.Errorf("names after garbage: %v", recs.names)
	}
	// A missing ConfigMap means no records.
	if recs = w.build(nil, nil); recs.names != 0 {
		t.Errorf("names without a ConfigMap: %v", recs.names)
	}
}

// TestBuildAnnotation: the tunnel ClusterIPs annotation is read with the
// text it describes. A change of the annotation alone is taken without
// counting the text's parse errors again; an oversized text is rejected
// together with its annotation.
func TestBuildAnnotation(t *testing.T) {
	w := newWatcher(source{configMapNamespace: "test", configMapName: "annotation", configMapKey: tunnelnodes.ConfigMapKey}, nil, nil)
	errs := parseErrors.WithLabelValues("test/annotation")
	svc := tunnelService("10.96.5.5")
	edge := func(recs *records) string {
		h, _ := recs.host("edge-1.")
		return fmt.Sprint(h.v4)
	}
	const text = "10.96.0.9 edge-1\nnot-an-ip x"

	if recs := w.build(annotatedCM(text, "10.96.0.9"), svc); edge(recs) != "[10.96.5.5]" || testutil.ToFloat64(errs) != 1 {
		t.Fatalf("edge-1 %s, parse errors %v", edge(recs), testutil.ToFloat64(errs))
	}
	// Annotated for another ClusterIP: 10.96.0.9 is no tunnel address now.
	if recs := w.build(annotatedCM(text, "10.96.0.7"), svc); edge(recs) != "[10.96.0.9]" || testutil.ToFloat64(errs) != 1 {
		t.Errorf("annotation change: edge-1 %s, parse errors %v", edge(recs), testutil.ToFloat64(errs))
	}
	w.build(annotatedCM(text, "10.96.0.9"), svc)
	huge := strings.Repeat("10.96.0.7 n\n", tunnelnodes.MaxHostsBytes/12+1)
	if recs := w.build(annotatedCM(huge, "10.96.0.7"), svc); edge(recs) != "[10.96.5.5]" || recs.names != 1 {
		t.Errorf("oversized text: edge-1 %s, %d names", edge(recs), recs.names)
	}
	// Records without the annotation (upstream's controllers) are served as
	// written unless they hold the current ClusterIP.
	if recs := w.build(recordsCM(text), svc); edge(recs) != "[10.96.0.9]" {
		t.Errorf("no annotation: edge-1 %s", edge(recs))
	}
}
