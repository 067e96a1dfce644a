package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// auditEvent is what ConfigMapWrites reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Resource  string `json:"resource"`
	} `json:"objectRef"`
	ResponseStatus struct{ Code int } `json:"responseStatus"`
	StageTimestamp time.Time          `json:"stageTimestamp"`
}

// ConfigMapWrites counts the successful creates, updates and patches of
// the kube-system ConfigMap name since a time, per user, from the audit logs
// of every control-plane node's apiserver (the load balancer spreads the
// writes over them).
func (c *Cluster) ConfigMapWrites(name string, since time.Time) (map[string]int, error) {
	writes := map[string]int{}
	for _, n := range c.ControlPlanes() {
		if err := countConfigMapWrites(filepath.Join(n.StateDir("var/log/kubernetes"), "audit.log"), name, since, writes); err != nil {
			return nil, fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	return writes, nil
}

func countConfigMapWrites(log, name string, since time.Time, writes map[string]int) error {
	f, err := os.Open(log)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("audit log: %w", err)
		}
		if e.Stage != "ResponseComplete" || e.ObjectRef.Resource != "configmaps" || e.ObjectRef.Namespace != "kube-system" ||
			e.ObjectRef.Name != name || e.ResponseStatus.Code >= 300 || e.StageTimestamp.Before(since) {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch":
			writes[e.User.Username]++
		}
	}
	return sc.Err()
}
