package harness

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"time"
)

// auditPolicy records who did what (no bodies: they may hold secrets).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// AuditEvent is the part of an apiserver audit event the tests read.
type AuditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Stage                    string    `json:"stage"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// AuditEvents returns the completed requests in the audit log (Options.AuditLog)
// for which keep returns true, oldest first.
func (cp *ControlPlane) AuditEvents(t TB, keep func(AuditEvent) bool) []AuditEvent {
	t.Helper()
	if cp.auditLog == "" {
		t.Fatal("AuditEvents needs harness.Options{AuditLog: true}")
	}
	f, err := os.Open(cp.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `"stage":"ResponseComplete"`) {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit log line %q: %v", line, err)
		}
		if keep(e) {
			events = append(events, e)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}
