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

// TestUpdateEntriesBadInput: malformed content is counted once per content,
// and a value over 1 MiB is rejected whole, keeping the last good records.
func TestUpdateEntriesBadInput(t *testing.T) {
	w := newWatcher(source{configMapNamespace: "test", configMapName: "bad-input", configMapKey: tunnelnodes.ConfigMapKey}, nil, nil)
	errs := parseErrors.WithLabelValues("test/bad-input")

	w.updateEntries(recordsCM("10.0.0.1 good\nnot-an-ip x\n10.0.0.2 bad/name"))
	if len(w.entries) != 1 || testutil.ToFloat64(errs) != 2 {
		t.Fatalf("entries %v, parse errors %v", w.entries, testutil.ToFloat64(errs))
	}
	// The same content again (a Service event, a resync) counts nothing more.
	w.updateEntries(recordsCM("10.0.0.1 good\nnot-an-ip x\n10.0.0.2 bad/name"))
	if testutil.ToFloat64(errs) != 2 {
		t.Errorf("parse errors counted twice for one content: %v", testutil.ToFloat64(errs))
	}

	huge := strings.Repeat("10.0.0.3 n\n", tunnelnodes.MaxHostsBytes/11+1)
	w.updateEntries(recordsCM(huge))
	if len(w.entries) != 1 || w.entries[0].Name != "good" {
		t.Errorf("oversized value replaced the records: %d entries", len(w.entries))
	}
	if testutil.ToFloat64(errs) != 3 {
		t.Errorf("oversized value not counted: %v", testutil.ToFloat64(errs))
	}

	// Binary garbage is skipped line by line, never a panic.
	w.updateEntries(recordsCM("\x00\xff\xfe 1.2.3.4\r\n1.2.3.4\x00 x\n10.0.0.4 ok"))
	if len(w.entries) != 1 || w.entries[0].Name != "ok" {
		t.Errorf("entries after garbage: %v", w.entries)
	}
	// A missing ConfigMap means no records.
	w.updateEntries(nil)
	if len(w.entries) != 0 {
		t.Errorf("entries without a ConfigMap: %v", w.entries)
	}
}

// TestUpdateEntriesAnnotation: the tunnel ClusterIPs annotation is read with
// the text it describes. A change of the annotation alone is taken without
// counting the text's parse errors again; an oversized text is rejected
// together with its annotation.
func TestUpdateEntriesAnnotation(t *testing.T) {
	w := newWatcher(source{configMapNamespace: "test", configMapName: "annotation", configMapKey: tunnelnodes.ConfigMapKey}, nil, nil)
	errs := parseErrors.WithLabelValues("test/annotation")
	annotated := func(text, ips string) *corev1.ConfigMap {
		cm := recordsCM(text)
		cm.Annotations = map[string]string{tunnelnodes.TunnelClusterIPsAnnotation: ips}
		return cm
	}
	const text = "10.96.0.9 edge-1\nnot-an-ip x"

	w.updateEntries(annotated(text, "10.96.0.9"))
	if fmt.Sprint(w.tunnelIPs) != "[10.96.0.9]" || testutil.ToFloat64(errs) != 1 {
		t.Fatalf("tunnel IPs %v, parse errors %v", w.tunnelIPs, testutil.ToFloat64(errs))
	}
	w.updateEntries(annotated(text, "10.96.0.9,fd00:10:96::9"))
	if fmt.Sprint(w.tunnelIPs) != "[10.96.0.9 fd00:10:96::9]" || testutil.ToFloat64(errs) != 1 {
		t.Errorf("annotation change: tunnel IPs %v, parse errors %v", w.tunnelIPs, testutil.ToFloat64(errs))
	}
	huge := strings.Repeat("10.96.0.7 n\n", tunnelnodes.MaxHostsBytes/12+1)
	w.updateEntries(annotated(huge, "10.96.0.7"))
	if fmt.Sprint(w.tunnelIPs) != "[10.96.0.9 fd00:10:96::9]" || len(w.entries) != 1 {
		t.Errorf("oversized text: tunnel IPs %v, %d entries", w.tunnelIPs, len(w.entries))
	}
	// Records without the annotation (upstream's controllers) have none.
	w.updateEntries(recordsCM(text))
	if len(w.tunnelIPs) != 0 {
		t.Errorf("no annotation: tunnel IPs %v", w.tunnelIPs)
	}
}
