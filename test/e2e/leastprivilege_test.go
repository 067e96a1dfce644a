package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"
	"github.com/yurtdns/yurtdns/test/harness"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
)

// stockCoreDNSRBAC is the ClusterRole and binding kubeadm gives CoreDNS for
// the kubernetes plugin (cmd/kubeadm/app/phases/addons/dns/manifests.go):
// cluster-wide list/watch of endpoints, services, pods, namespaces and
// endpointslices, and get on nodes. yurtdns adds only its Role next to it.
func stockCoreDNSRBAC(sa string) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:coredns"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: tunnelnodes.Namespace}}}
}

// access is one row of the RBAC table: a real request made as an identity
// (impersonated from the harness admin) and whether RBAC must allow it.
// For list and watch, name is a metadata.name field selector (as the plugin
// and the sync's informers send it); "" lists everything. Namespace "" is
// cluster-wide. Updates send the object as stored with a probe annotation
// added; patches add the annotation; creates send a minimal valid object.
type access struct {
	verb, resource, namespace, name string
	allowed                         bool
	why                             string
}

func (a access) String() string {
	where := a.name
	if a.namespace != "" {
		where = a.namespace + "/" + a.name
	}
	if (a.verb == "list" || a.verb == "watch") && a.name == "" {
		where = "all in " + a.namespace
		if a.namespace == "" {
			where = "all namespaces"
		}
	} else if a.verb == "list" || a.verb == "watch" {
		where = "metadata.name=" + a.name + " in " + a.namespace
	}
	return fmt.Sprintf("%s %s %s", a.verb, a.resource, where)
}

func allow(verb, resource, namespace, name string, why ...string) access {
	return access{verb: verb, resource: resource, namespace: namespace, name: name, allowed: true, why: strings.Join(why, " ")}
}

func deny(verb, resource, namespace, name string) access {
	return access{verb: verb, resource: resource, namespace: namespace, name: name}
}

// resources maps the table's resource names to the API.
var resources = map[string]schema.GroupVersionResource{
	"configmaps":           {Version: "v1", Resource: "configmaps"},
	"services":             {Version: "v1", Resource: "services"},
	"nodes":                {Version: "v1", Resource: "nodes"},
	"secrets":              {Version: "v1", Resource: "secrets"},
	"pods":                 {Version: "v1", Resource: "pods"},
	"namespaces":           {Version: "v1", Resource: "namespaces"},
	"serviceaccounts":      {Version: "v1", Resource: "serviceaccounts"},
	"leases":               {Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	"events":               {Version: "v1", Resource: "events"},
	"events.events.k8s.io": {Group: "events.k8s.io", Version: "v1", Resource: "events"},
	"endpointslices":       {Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	"deployments":          {Group: "apps", Version: "v1", Resource: "deployments"},
	"clusterrolebindings":  {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
}

// createBody is a minimal valid object of the resource (or, for the token
// subresource, a TokenRequest).
func createBody(resource, namespace, name string) *unstructured.Unstructured {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	o := map[string]any{"metadata": meta}
	switch resource {
	case "configmaps":
		o["apiVersion"], o["kind"], o["data"] = "v1", "ConfigMap", map[string]any{"probe": "x"}
	case "secrets":
		o["apiVersion"], o["kind"], o["stringData"] = "v1", "Secret", map[string]any{"probe": "x"}
	case "services":
		o["apiVersion"], o["kind"], o["spec"] = "v1", "Service", map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}
	case "nodes":
		o["apiVersion"], o["kind"] = "v1", "Node"
	case "pods":
		o["apiVersion"], o["kind"], o["spec"] = "v1", "Pod", map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}
	case "serviceaccounts/token":
		o["apiVersion"], o["kind"], o["spec"] = "authentication.k8s.io/v1", "TokenRequest", map[string]any{}
	case "leases":
		o["apiVersion"], o["kind"], o["spec"] = "coordination.k8s.io/v1", "Lease", map[string]any{}
	case "events":
		o["apiVersion"], o["kind"], o["type"] = "v1", "Event", "Normal"
		o["reason"], o["message"] = "Probe", "least-privilege probe"
		o["source"] = map[string]any{"component": "yurtdns-least-privilege-test"}
		o["involvedObject"] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": tunnelnodes.Namespace, "name": tunnelnodes.ConfigMapName}
	case "events.events.k8s.io":
		o["apiVersion"], o["kind"] = "events.k8s.io/v1", "Event"
		o["eventTime"] = time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
		o["reportingController"], o["reportingInstance"] = "yurtdns.io/least-privilege-test", "probe"
		o["action"], o["reason"], o["type"], o["note"] = "Probe", "Probe", "Normal", "least-privilege probe"
		o["regarding"] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "namespace": tunnelnodes.Namespace, "name": tunnelnodes.ConfigMapName}
	case "clusterrolebindings":
		o["apiVersion"], o["kind"] = "rbac.authorization.k8s.io/v1", "ClusterRoleBinding"
		o["roleRef"] = map[string]any{"apiGroup": rbacv1.GroupName, "kind": "ClusterRole", "name": "cluster-admin"}
		o["subjects"] = []any{map[string]any{"kind": "ServiceAccount", "name": "default", "namespace": tunnelnodes.Namespace}}
	}
	return &unstructured.Unstructured{Object: o}
}

const probeAnnotation = "yurtdns.io/least-privilege-probe"

// do performs the request as the identity behind as; admin reads the object
// an update sends.
func (a access) do(ctx context.Context, admin, as dynamic.Interface) error {
	res, sub, _ := strings.Cut(a.resource, "/")
	gvr, ok := resources[res]
	if !ok {
		return fmt.Errorf("unknown resource %q in the table", a.resource)
	}
	var subresources []string
	if sub != "" {
		subresources = []string{sub}
	}
	on := func(c dynamic.Interface) dynamic.ResourceInterface {
		if a.namespace == "" {
			return c.Resource(gvr)
		}
		return c.Resource(gvr).Namespace(a.namespace)
	}
	list := metav1.ListOptions{}
	if a.name != "" {
		list.FieldSelector = "metadata.name=" + a.name
	}
	switch a.verb {
	case "get":
		_, err := on(as).Get(ctx, a.name, metav1.GetOptions{}, subresources...)
		return err
	case "list":
		_, err := on(as).List(ctx, list)
		return err
	case "watch":
		list.TimeoutSeconds = new(int64(5))
		w, err := on(as).Watch(ctx, list)
		if err == nil {
			w.Stop()
		}
		return err
	case "create":
		_, err := on(as).Create(ctx, createBody(a.resource, a.namespace, a.name), metav1.CreateOptions{}, subresources...)
		return err
	case "update":
		// Read again on a conflict: the running sync renews its Lease and
		// may write between the read and the update.
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			current, err := on(admin).Get(ctx, a.name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("admin reading the object to send: %w", err)
			}
			annotations := current.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[probeAnnotation] = "update"
			current.SetAnnotations(annotations)
			if sub == "status" {
				_, err = on(as).UpdateStatus(ctx, current, metav1.UpdateOptions{})
			} else {
				_, err = on(as).Update(ctx, current, metav1.UpdateOptions{}, subresources...)
			}
			return err
		})
	case "patch":
		patch := []byte(`{"metadata":{"annotations":{"` + probeAnnotation + `":"patch"}}}`)
		_, err := on(as).Patch(ctx, a.name, types.MergePatchType, patch, metav1.PatchOptions{}, subresources...)
		return err
	case "delete":
		return on(as).Delete(ctx, a.name, metav1.DeleteOptions{})
	}
	return fmt.Errorf("unknown verb %q in the table", a.verb)
}

// serviceAccountUser is the user the apiserver authenticates a
// ServiceAccount's tokens as.
func serviceAccountUser(name string) rest.ImpersonationConfig {
	ns := tunnelnodes.Namespace
	return rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
}

// checkAccess runs the table as the ServiceAccount (impersonated), after
// checking the apiserver sees exactly that user, and returns how many
// requests were allowed and forbidden as expected.
func checkAccess(t *testing.T, cp *harness.ControlPlane, sa string, table []access) (allowed, forbidden int) {
	t.Helper()
	ctx := context.Background()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = serviceAccountUser(sa)
	cfg.QPS, cfg.Burst = 200, 400
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Username; got != cfg.Impersonate.UserName {
		t.Fatalf("impersonating %s, the apiserver sees %s", cfg.Impersonate.UserName, got)
	}
	as, admin := dynamic.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cp.Config)
	for _, a := range table {
		err := a.do(ctx, admin, as)
		switch {
		case a.allowed && err == nil:
			allowed++
		case a.allowed:
			t.Errorf("%s: %s must be allowed (%s), got %v", sa, a, a.why, err)
		case apierrors.IsForbidden(err):
			forbidden++
		default:
			t.Errorf("%s: %s must be Forbidden, got %v", sa, a, err)
		}
	}
	t.Logf("%s: %d allowed and %d forbidden requests as expected (%d in the table)", sa, allowed, forbidden, len(table))
	return allowed, forbidden
}

// corednsTable is what coredns-yurt's ServiceAccount may do with yurtdns's
// Role: read the records ConfigMap and the tunnel Service by name (get, and
// list/watch field-selected to the name, exactly as yurthosts watches), and
// nothing else: no other ConfigMap, no Secret, no write of any kind.
func corednsTable(sa, secret string) []access {
	ns, cm, svc := tunnelnodes.Namespace, tunnelnodes.ConfigMapName, tunnelnodes.ServiceName
	shards := tunnelnodes.ShardsNamespace
	why := "yurthosts reads it"
	return []access{
		allow("get", "configmaps", ns, cm, why),
		allow("list", "configmaps", ns, cm, why),
		allow("watch", "configmaps", ns, cm, why),
		allow("get", "services", ns, svc, why),
		allow("list", "services", ns, svc, why),
		allow("watch", "services", ns, svc, why),
		allow("list", "configmaps", shards, "", "yurthosts watches the shards by label: their namespace holds nothing else"),
		allow("watch", "configmaps", shards, "", "yurthosts watches the shards by label: their namespace holds nothing else"),
		deny("create", "configmaps", shards, "yurtdns-probe-coredns"),
		deny("update", "configmaps", shards, tunnelnodes.ShardName(cm, 1, 0)),
		deny("delete", "configmaps", shards, tunnelnodes.ShardName(cm, 1, 0)),
		deny("list", "secrets", shards, ""),

		deny("get", "configmaps", ns, "coredns"),
		deny("get", "configmaps", ns, tunnelnodes.ServerConfigName),
		deny("list", "configmaps", ns, ""),
		deny("watch", "configmaps", ns, ""),
		deny("list", "configmaps", ns, "coredns"),
		deny("list", "configmaps", "", cm),
		deny("watch", "configmaps", "", cm),
		deny("get", "services", ns, "kube-dns"),
		deny("get", "secrets", ns, secret),
		deny("list", "secrets", ns, ""),
		deny("watch", "secrets", ns, ""),
		deny("list", "secrets", "", ""),
		deny("create", "configmaps", ns, "yurtdns-probe-coredns"),
		deny("update", "configmaps", ns, cm),
		deny("patch", "configmaps", ns, cm),
		deny("delete", "configmaps", ns, cm),
		deny("update", "configmaps", ns, "coredns"),
		deny("create", "services", ns, "yurtdns-probe-coredns"),
		deny("update", "services", ns, svc),
		deny("patch", "services", ns, svc),
		deny("delete", "services", ns, svc),
		deny("create", "nodes", "", "yurtdns-probe-coredns"),
		deny("update", "nodes", "", "worker-1"),
		deny("patch", "nodes", "", "worker-1"),
		deny("update", "nodes/status", "", "worker-1"),
		deny("delete", "nodes", "", "worker-1"),
		deny("create", "secrets", ns, "yurtdns-probe-coredns"),
		deny("update", "secrets", ns, secret),
		deny("delete", "secrets", ns, secret),
		deny("create", "leases", ns, "yurtdns-probe-coredns"),
		deny("update", "leases", ns, "tunnel-nodes-sync"),
		deny("delete", "leases", ns, "tunnel-nodes-sync"),
		deny("create", "events.events.k8s.io", ns, "yurtdns-probe-coredns.1"),
		deny("create", "events", ns, "yurtdns-probe-coredns.2"),
		deny("create", "pods", ns, "yurtdns-probe-coredns"),
		deny("create", "serviceaccounts/token", ns, sa),
		deny("patch", "deployments", ns, "coredns"),
		deny("create", "clusterrolebindings", "", "yurtdns-probe-coredns"),
	}
}

// stockCoreDNSReads are the kubernetes plugin's reads. yurtdns's Role does
// not grant them; the stock system:coredns ClusterRole does, legitimately.
func stockCoreDNSReads() []access {
	var table []access
	for _, r := range []string{"services", "endpointslices", "pods", "namespaces"} {
		table = append(table, deny("list", r, "", ""), deny("watch", r, "", ""))
	}
	return append(table, deny("get", "nodes", "", "worker-1"))
}

// syncTable is what tunnel-nodes-sync's ServiceAccount may do: read nodes;
// read and update the records ConfigMap and the tunnel Service; read the
// server config; read kube-dns and patch it (--kube-dns-topology), never
// update it; its Lease; events. RBAC cannot limit create to a name, so
// creating a ConfigMap or a Lease in kube-system is allowed under any name
// (the sync creates the records ConfigMap when missing, and its Lease), but
// what it creates under another name it cannot read back.
func syncTable(sa, secret string) []access {
	ns, cm, svc, cfg := tunnelnodes.Namespace, tunnelnodes.ConfigMapName, tunnelnodes.ServiceName, tunnelnodes.ServerConfigName
	shards := tunnelnodes.ShardsNamespace
	lease := "tunnel-nodes-sync"
	return []access{
		allow("get", "nodes", "", "worker-1", "the records come from nodes"),
		allow("list", "nodes", "", "", "the records come from nodes"),
		allow("watch", "nodes", "", "", "the records come from nodes"),
		allow("get", "configmaps", ns, cm, "its records ConfigMap"),
		allow("list", "configmaps", ns, cm, "its records ConfigMap"),
		allow("watch", "configmaps", ns, cm, "its records ConfigMap"),
		allow("update", "configmaps", ns, cm, "it writes the records"),
		allow("get", "configmaps", ns, cfg, "the server config lists the ports"),
		allow("list", "configmaps", ns, cfg, "the server config lists the ports"),
		allow("watch", "configmaps", ns, cfg, "the server config lists the ports"),
		allow("create", "configmaps", ns, "yurtdns-probe-sync", "it creates the records ConfigMap when missing; RBAC cannot limit create to a name"),
		deny("get", "configmaps", ns, "yurtdns-probe-sync"),
		allow("list", "configmaps", shards, "", "it keeps the shards, in a namespace of their own"),
		allow("watch", "configmaps", shards, "", "it keeps the shards, in a namespace of their own"),
		allow("create", "configmaps", shards, "yurtdns-probe-sync", "it writes the shards"),
		allow("update", "configmaps", shards, "yurtdns-probe-sync", "it writes the shards"),
		allow("delete", "configmaps", shards, "yurtdns-probe-sync", "it deletes an old shard set"),
		deny("list", "secrets", shards, ""),
		allow("get", "services", ns, svc, "the tunnel Service"),
		allow("list", "services", ns, svc, "the tunnel Service"),
		allow("watch", "services", ns, svc, "the tunnel Service"),
		allow("update", "services", ns, svc, "it writes the dnat ports"),
		allow("get", "services", ns, "kube-dns", "--kube-dns-topology watches kube-dns"),
		allow("list", "services", ns, "kube-dns", "--kube-dns-topology watches kube-dns"),
		allow("watch", "services", ns, "kube-dns", "--kube-dns-topology watches kube-dns"),
		allow("patch", "services", ns, "kube-dns", "--kube-dns-topology patches its topology annotation back"),
		allow("get", "leases", ns, lease, "leader election"),
		allow("update", "leases", ns, lease, "leader election"),
		allow("create", "leases", ns, "yurtdns-probe-sync", "leader election creates its Lease; RBAC cannot limit create to a name"),
		deny("get", "leases", ns, "yurtdns-probe-sync"),
		deny("get", "leases", ns, "kube-scheduler"),
		deny("update", "leases", ns, "kube-scheduler"),
		deny("delete", "leases", ns, lease),
		allow("create", "events.events.k8s.io", ns, "yurtdns-probe-sync.1", "it reports bad port entries"),
		allow("patch", "events.events.k8s.io", ns, "yurtdns-probe-sync.1", "the events recorder patches a series"),
		allow("create", "events", ns, "yurtdns-probe-sync.2", "leader election records \"became leader\" through the core API"),
		allow("patch", "events", ns, "yurtdns-probe-sync.2", "the core events recorder patches repeats"),
		deny("get", "events", ns, "yurtdns-probe-sync.2"),

		deny("get", "configmaps", ns, "coredns"),
		deny("list", "configmaps", ns, ""),
		deny("watch", "configmaps", ns, ""),
		deny("list", "configmaps", "", cm),
		deny("update", "configmaps", ns, "coredns"),
		deny("patch", "configmaps", ns, "coredns"),
		deny("delete", "configmaps", ns, "coredns"),
		deny("update", "configmaps", ns, cfg),
		deny("patch", "configmaps", ns, cfg),
		deny("patch", "configmaps", ns, cm),
		deny("delete", "configmaps", ns, cm),
		deny("create", "configmaps", "default", "yurtdns-probe-sync"),
		deny("list", "services", ns, ""),
		deny("list", "services", "", svc),
		deny("update", "services", ns, "kube-dns"),
		deny("delete", "services", ns, "kube-dns"),
		deny("update", "services", "default", "kubernetes"),
		deny("patch", "services", "default", "kubernetes"),
		deny("create", "services", ns, "yurtdns-probe-sync"),
		deny("patch", "services", ns, svc),
		deny("delete", "services", ns, svc),
		deny("create", "nodes", "", "yurtdns-probe-sync"),
		deny("update", "nodes", "", "worker-1"),
		deny("patch", "nodes", "", "worker-1"),
		deny("update", "nodes/status", "", "worker-1"),
		deny("delete", "nodes", "", "worker-1"),
		deny("get", "secrets", ns, secret),
		deny("list", "secrets", ns, ""),
		deny("watch", "secrets", ns, ""),
		deny("list", "secrets", "", ""),
		deny("create", "secrets", ns, "yurtdns-probe-sync"),
		deny("create", "pods", ns, "yurtdns-probe-sync"),
		deny("create", "serviceaccounts/token", ns, sa),
		deny("patch", "deployments", ns, "coredns"),
		deny("create", "clusterrolebindings", "", "yurtdns-probe-sync"),
	}
}

// serviceAccountOf returns the ServiceAccount of the workload kind renders in dir.
func serviceAccountOf(t harness.TB, dir, kind string) string {
	t.Helper()
	objs, err := deploy.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == kind {
			sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
			if sa == "" {
				t.Fatalf("deploy/%s %s has no serviceAccountName", dir, kind)
			}
			return sa
		}
	}
	t.Fatalf("deploy/%s renders no %s", dir, kind)
	return ""
}

// applyRBAC applies what install's records, rbac and sync steps apply (the sync
// Deployment only as a dry run: envtest runs no pods), labelled as install
// labels what it creates, so `install --dry-run` later sees them as its own.
func applyRBAC(t harness.TB, cp *harness.ControlPlane) {
	t.Helper()
	for _, dir := range []string{deploy.Records, deploy.CoreDNSRBAC, deploy.TunnelNodesSync} {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatal(err)
		}
		var real []*unstructured.Unstructured
		for _, o := range objs {
			labels := o.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[engine.ManagedByLabel] = "yurtdns"
			o.SetLabels(labels)
			if o.GetKind() != "Deployment" {
				real = append(real, o)
			}
		}
		if dir != deploy.Records { // a dry run of what goes in a namespace needs the namespace
			cp.Apply(t, objs, true)
		}
		cp.Apply(t, real, false)
	}
}

// waitAnswer waits until every server answers name A with exactly want.
func waitAnswer(t *testing.T, name, want string, servers ...*harness.CoreDNS) {
	t.Helper()
	for _, s := range servers {
		expectAnswer(t, 10*time.Second, s.DNSAddr, name, "A", want)
	}
}

// leastPrivilegeCorefile runs yurthosts with the log and debug plugins (the
// most a CoreDNS operator turns on when troubleshooting).
const leastPrivilegeCorefile = `.:{{.DNSPort}} {
    bind 127.0.0.1
    debug
    errors
    log
    health {{.HealthAddr}}
    ready {{.ReadyAddr}}
    prometheus {{.MetricsAddr}}
    yurthosts {
        kubeconfig {{.Kubeconfig}}
        shards yurtdns-records
    }
}
`

// credential is something no process may print: a label and the forms it
// could leak in.
type credential struct {
	what  string
	forms []string
}

// tokenCredential: the bearer token, raw and base64.
func tokenCredential(what, token string) credential {
	return credential{what: what, forms: []string{token, base64.StdEncoding.EncodeToString([]byte(token))}}
}

// clientCertCredentials: the client key and certificate of a kubeconfig,
// each as PEM, as the kubeconfig's base64 of the PEM, and as the PEM body
// (the base64 of the DER, unwrapped).
func clientCertCredentials(t *testing.T, what, kubeconfig string) []credential {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if auth == nil || len(auth.ClientKeyData) == 0 || len(auth.ClientCertificateData) == 0 {
		t.Fatalf("%s: no client certificate and key in %s", what, kubeconfig)
	}
	var creds []credential
	for kind, data := range map[string][]byte{"client key": auth.ClientKeyData, "client certificate": auth.ClientCertificateData} {
		block, _ := pem.Decode(data)
		if block == nil {
			t.Fatalf("%s: %s is not PEM", what, kind)
		}
		creds = append(creds, credential{what: what + " " + kind, forms: []string{
			string(data), base64.StdEncoding.EncodeToString(data), base64.StdEncoding.EncodeToString(block.Bytes)}})
	}
	return creds
}

// leakWindow: any run of this many characters of a credential in a log is
// a leak. Shorter runs (PEM armour, the base64 of it) are shared with public
// material such as the CA certificate.
const leakWindow = 40

// leakScanner finds any leakWindow-long piece of any form of any credential.
type leakScanner map[string]string // window -> what

func newLeakScanner(creds []credential, public ...string) leakScanner {
	s := leakScanner{}
	add := func(text, what string) {
		for i := 0; i+leakWindow <= len(text); i++ {
			s[text[i:i+leakWindow]] = what
		}
	}
	for _, c := range creds {
		for _, f := range c.forms {
			// PEM as written, each of its lines, and its lines joined.
			add(f, c.what)
			for _, line := range strings.Split(f, "\n") {
				add(line, c.what)
			}
			add(strings.ReplaceAll(f, "\n", ""), c.what)
		}
	}
	for _, p := range public {
		for i := 0; i+leakWindow <= len(p); i++ {
			delete(s, p[i:i+leakWindow])
		}
	}
	return s
}

// hexDumpLine is a line of encoding/hex.Dump, as client-go logs request and
// response bodies that are not text (protobuf) at -v=8 and up.
var hexDumpLine = regexp.MustCompile(`(?m)^\s*([0-9a-f]{8})  ((?:[0-9a-f]{2} {1,2})+)`)

// hexDumps decodes every hex dump in out back to its bytes, so a credential
// inside a protobuf body is found too.
func hexDumps(out string) string {
	var b strings.Builder
	for _, m := range hexDumpLine.FindAllStringSubmatch(out, -1) {
		if m[1] == "00000000" {
			b.WriteByte('\n')
		}
		for _, f := range strings.Fields(m[2]) {
			if v, err := hex.DecodeString(f); err == nil {
				b.Write(v)
			}
		}
	}
	return b.String()
}

// scan returns what leaked into out, as text or inside a hex dump.
func (s leakScanner) scan(out string) []string {
	out += "\n" + hexDumps(out)
	var leaks []string
	for i := 0; i+leakWindow <= len(out); i++ {
		if what, ok := s[out[i:i+leakWindow]]; ok && !slices.Contains(leaks, what) {
			leaks = append(leaks, what)
		}
	}
	return leaks
}

// The TestLeastPrivilege* tests apply deploy/'s RBAC to the real apiserver
// and check both identities with a table of real requests made through
// impersonation (allowed and Forbidden, exactly), run the real binaries with
// those identities' credentials (a ServiceAccount token from the
// TokenRequest API, and a client certificate) and check they do their whole
// job with them, then check no process printed a credential or a Secret at
// -v=10. They share one cluster (leastPrivilege), in the order they are
// declared: the last one scans the output of every process the others ran.

// logged is a process whose output is scanned for credentials.
type logged struct {
	what string
	p    *harness.Process
}

// leastPrivilegeFixture is the cluster, the credentials and the processes
// the TestLeastPrivilege* tests share.
type leastPrivilegeFixture struct {
	start                   time.Time
	cp                      *harness.ControlPlane
	corednsSA, syncSA       string
	secretName              string
	secretValue             string
	syncToken, syncCert     string // kubeconfigs
	corednsToken            string
	corednsCert             string
	installerToken          string
	syncTokenValue          string
	corednsTokenValue       string
	installerTokenValue     string
	syncByToken, syncByCert *harness.Sync
	dnsByCert, dnsByToken   *harness.CoreDNS
	processes               []logged // every process, for the log scan
	counts                  []string // the RBAC tables' tallies
}

// leastPrivilege builds a kubeadm-shaped cluster with deploy/'s RBAC and
// the credentials of each identity, and starts the sync with its
// ServiceAccount's token, alone (so it is the one writing), then
// coredns-yurt with CoreDNS's ServiceAccount by client certificate and by
// token, then a standby sync with the ServiceAccount's client certificate.
var leastPrivilege = &shared[*leastPrivilegeFixture]{build: func(tb harness.TB) *leastPrivilegeFixture {
	start := time.Now()
	ctx := context.Background()
	cp := harness.Start(tb, harness.Options{})
	ns := tunnelnodes.Namespace
	corednsSA := serviceAccountOf(tb, deploy.CoreDNSYurt, "DaemonSet")
	syncSA := serviceAccountOf(tb, deploy.TunnelNodesSync, "Deployment")

	// A kubeadm-shaped cluster (CoreDNS's ServiceAccount comes from it),
	// the tunnel Service, a server config with one bad entry, two nodes, a
	// Secret with a known value, another component's Lease.
	cp.CreateFromFile(tb, filepath.Join(fixtures, "coredns.yaml"))
	cp.CreateFromFile(tb, filepath.Join(fixtures, "kube-proxy.yaml"))
	cp.CreateService(tb, harness.TunnelService("10.96.0.9"))
	cp.ApplyConfigMap(tb, harness.ServerConfig(map[string]string{tunnelnodes.HTTPSProxyPortsKey: "9100,bogus"}))
	cp.CreateNode(tb, harness.Node{Name: "worker-1", InternalIP: "192.168.0.21", Edge: true})
	cp.CreateNode(tb, harness.Node{Name: "master-1", InternalIP: "192.168.0.10"})
	random := make([]byte, 24)
	if _, err := rand.Read(random); err != nil {
		tb.Fatal(err)
	}
	secretValue := "yurtdns-secret-" + hex.EncodeToString(random)
	secretName := "yurtdns-probe-secret"
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName},
		StringData: map[string]string{"password": secretValue}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	if _, err := cp.Client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-scheduler"}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	applyRBAC(tb, cp)

	// Credentials: a bearer token from the TokenRequest API and a client
	// certificate for each identity; an installer (cluster-admin) token.
	syncToken, syncTokenValue := cp.ServiceAccountTokenKubeconfig(tb, ns, syncSA)
	syncCert := cp.ServiceAccountKubeconfig(tb, ns, syncSA)
	corednsToken, corednsTokenValue := cp.ServiceAccountTokenKubeconfig(tb, ns, corednsSA)
	corednsCert := cp.ServiceAccountKubeconfig(tb, ns, corednsSA)
	installerToken, installerTokenValue := cp.ServiceAccountTokenKubeconfig(tb, ns, "yurtdns-installer")
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "yurtdns-installer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "yurtdns-installer", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}

	// The sync with its ServiceAccount's token, alone (so it is the one
	// writing): it creates the records ConfigMap and its Lease and writes
	// the records (TestLeastPrivilegeTokenSync checks the port, kube-dns's
	// annotation and events). Both syncs run as deploy/'s Deployment does.
	syncByToken := harness.StartSync(tb, syncToken, "-v=10", kubeDNSTopologyArg)
	expectRecords(tb, 15*time.Second, cp, "10.96.0.9\tworker-1", "192.168.0.10\tmaster-1")
	// coredns-yurt with CoreDNS's ServiceAccount, once by client
	// certificate and once by token.
	dnsByCert := harness.StartCoreDNS(tb, corednsCert, leastPrivilegeCorefile)
	dnsByToken := harness.StartCoreDNS(tb, corednsToken, leastPrivilegeCorefile)
	// A standby sync with the ServiceAccount's client certificate.
	syncByCert := harness.StartSync(tb, syncCert, "-v=10", kubeDNSTopologyArg)
	return &leastPrivilegeFixture{start: start, cp: cp, corednsSA: corednsSA, syncSA: syncSA, secretName: secretName, secretValue: secretValue,
		syncToken: syncToken, syncCert: syncCert, corednsToken: corednsToken, corednsCert: corednsCert, installerToken: installerToken,
		syncTokenValue: syncTokenValue, corednsTokenValue: corednsTokenValue, installerTokenValue: installerTokenValue,
		syncByToken: syncByToken, syncByCert: syncByCert, dnsByCert: dnsByCert, dnsByToken: dnsByToken,
		processes: []logged{{"tunnel-nodes-sync run -v=10 (ServiceAccount token)", syncByToken.Process},
			{"coredns-yurt log+debug (client certificate)", dnsByCert.Process},
			{"coredns-yurt log+debug (ServiceAccount token)", dnsByToken.Process},
			{"tunnel-nodes-sync run -v=10 (client certificate)", syncByCert.Process}},
	}
}}

// TestLeastPrivilegeTokenSync: the sync with its ServiceAccount's token wrote
// the port (skipping the bad entry) and kube-dns's topology annotation, and
// recorded an event for the bad entry and its leader election.
func TestLeastPrivilegeTokenSync(t *testing.T) {
	f := leastPrivilege.get(t)
	ctx, cp, ns := context.Background(), f.cp, tunnelnodes.Namespace
	harness.Eventually(t, 10*time.Second, func() error {
		s, err := cp.Client.CoreV1().Services(ns).Get(ctx, tunnelnodes.KubeDNSService, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v := s.Annotations[tunnelnodes.TopologyKeysAnnotation]; v != kubeDNSTopology {
			return fmt.Errorf("kube-dns %s=%q, want %q", tunnelnodes.TopologyKeysAnnotation, v, kubeDNSTopology)
		}
		return nil
	})
	harness.Eventually(t, 10*time.Second, func() error {
		s, err := cp.Client.CoreV1().Services(ns).Get(ctx, tunnelnodes.ServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var names []string
		for _, p := range s.Spec.Ports {
			names = append(names, p.Name)
		}
		if !slices.Equal(names, []string{"https", "http", "dnat-9100"}) {
			return fmt.Errorf("tunnel Service ports %v, want https, http, dnat-9100 (the bad entry skipped)", names)
		}
		return nil
	})
	harness.Eventually(t, 10*time.Second, func() error {
		events, err := cp.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "InvalidPortEntry" && e.Regarding.Name == tunnelnodes.ServerConfigName {
				return nil
			}
		}
		return fmt.Errorf("no InvalidPortEntry event from the sync among %d events", len(events.Items))
	})
	harness.Eventually(t, 10*time.Second, func() error { // leader election's own event, through the core API
		events, err := cp.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == "LeaderElection" && e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == "tunnel-nodes-sync" {
				return nil
			}
		}
		return fmt.Errorf("no LeaderElection event on the sync's Lease among %d core events", len(events.Items))
	})
}

// TestLeastPrivilegeCoreDNSAnswers: coredns-yurt answers with CoreDNS's
// ServiceAccount, by client certificate and by token.
func TestLeastPrivilegeCoreDNSAnswers(t *testing.T) {
	f := leastPrivilege.get(t)
	waitAnswer(t, "worker-1", "10.96.0.9", f.dnsByCert, f.dnsByToken)
	waitAnswer(t, "master-1", "192.168.0.10", f.dnsByCert, f.dnsByToken)
}

// TestLeastPrivilegeRBAC: each identity may make exactly the requests of its
// table.
func TestLeastPrivilegeRBAC(t *testing.T) {
	f := leastPrivilege.get(t)
	cp, corednsSA, syncSA, secretName := f.cp, f.corednsSA, f.syncSA, f.secretName
	a, n := checkAccess(t, cp, corednsSA, slices.Concat(corednsTable(corednsSA, secretName), stockCoreDNSReads()))
	f.counts = append(f.counts, fmt.Sprintf("%s (yurtdns Role): %d allowed, %d forbidden", corednsSA, a, n))
	a, n = checkAccess(t, cp, syncSA, syncTable(syncSA, secretName))
	f.counts = append(f.counts, fmt.Sprintf("%s: %d allowed, %d forbidden", syncSA, a, n))
}

// TestLeastPrivilegeFollowsAndFailsOver: the records follow a new node
// through the token sync into both servers; the token sync steps down and
// the certificate sync writes the next change.
func TestLeastPrivilegeFollowsAndFailsOver(t *testing.T) {
	f := leastPrivilege.get(t)
	cp, dnsByCert, dnsByToken, syncByToken := f.cp, f.dnsByCert, f.dnsByToken, f.syncByToken
	// The records follow a new node through the token sync into both servers.
	cp.CreateNode(t, harness.Node{Name: "worker-2", InternalIP: "192.168.0.22", Edge: true})
	expectRecords(t, 15*time.Second, cp, "10.96.0.9\tworker-1", "10.96.0.9\tworker-2", "192.168.0.10\tmaster-1")
	waitAnswer(t, "worker-2", "10.96.0.9", dnsByCert, dnsByToken)

	// The token sync steps down (it releases its Lease); the certificate
	// sync takes over and writes the next change.
	syncByToken.Stop()
	cp.CreateNode(t, harness.Node{Name: "master-2", InternalIP: "192.168.0.11"})
	expectRecords(t, 15*time.Second, cp, "10.96.0.9\tworker-1", "10.96.0.9\tworker-2", "192.168.0.10\tmaster-1", "192.168.0.11\tmaster-2")
	waitAnswer(t, "master-2", "192.168.0.11", dnsByCert, dnsByToken)
}

// TestLeastPrivilegeRBACWithStockCoreDNS: with kubeadm's stock
// system:coredns ClusterRole next to yurtdns's Role (as on a real cluster),
// CoreDNS's ServiceAccount may also list/watch services, endpointslices,
// pods and namespaces cluster-wide and get nodes, for the kubernetes plugin:
// legitimate reads, and still no other ConfigMap, no Secret, no write.
func TestLeastPrivilegeRBACWithStockCoreDNS(t *testing.T) {
	f := leastPrivilege.get(t)
	ctx, cp, corednsSA, secretName := context.Background(), f.cp, f.corednsSA, f.secretName
	role, binding := stockCoreDNSRBAC(corednsSA)
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var stock []access
	for _, r := range stockCoreDNSReads() {
		r.allowed, r.why = true, "stock system:coredns, for the kubernetes plugin"
		stock = append(stock, r)
	}
	a, n := checkAccess(t, cp, corednsSA, slices.Concat(corednsTable(corednsSA, secretName), stock))
	f.counts = append(f.counts, fmt.Sprintf("%s (yurtdns Role + stock system:coredns): %d allowed, %d forbidden", corednsSA, a, n))
}

// TestLeastPrivilegeInstallDryRunAndStatus: install --dry-run and status at
// -v=10, with a token and with a client certificate (the admin's).
func TestLeastPrivilegeInstallDryRunAndStatus(t *testing.T) {
	f := leastPrivilege.get(t)
	cp, installerToken := f.cp, f.installerToken
	manifests, backups := t.TempDir(), filepath.Join(t.TempDir(), "backup")
	for _, file := range []string{"kube-apiserver.yaml", "kube-controller-manager.yaml"} {
		data, err := os.ReadFile(filepath.Join(fixtures, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(manifests, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, kc := range []struct{ what, path string }{{"ServiceAccount token", installerToken}, {"client certificate", cp.Kubeconfig}} {
		for _, cmd := range [][]string{{"install", "--dry-run"}, {"status"}} {
			args := append(slices.Clone(cmd), "-v=10", "--kubeconfig", kc.path)
			if cmd[0] == "install" { // status reads them from the install state
				args = append(args, "--manifests-dir", manifests, "--backup-dir", backups)
			}
			p := harness.StartProcess(t, harness.Binary(t, "tunnel-nodes-sync"), args...)
			err := p.Wait(t, time.Minute)
			out := p.Output()
			if cmd[0] == "install" && err != nil {
				t.Errorf("install --dry-run (%s): %v\n%s", kc.what, err, out)
			}
			if !strings.Contains(out, "coredns-daemonset") || !strings.Contains(out, "kube-dns-topology") {
				t.Errorf("%s (%s) did not report the steps:\n%s", strings.Join(cmd, " "), kc.what, out)
			}
			f.processes = append(f.processes, logged{fmt.Sprintf("tunnel-nodes-sync %s -v=10 (%s)", strings.Join(cmd, " "), kc.what), p})
		}
	}
}

// TestLeastPrivilegeNoCredentialsInLogs: no process printed a credential or
// a Secret at -v=10, and none was refused a request it needs; the last
// TestLeastPrivilege* test.
func TestLeastPrivilegeNoCredentialsInLogs(t *testing.T) {
	f := leastPrivilege.get(t)
	cp, processes := f.cp, f.processes
	t.Cleanup(leastPrivilege.close) // the last of them
	for _, p := range []*harness.Process{f.syncByCert.Process, f.dnsByCert.Process, f.dnsByToken.Process} {
		p.Stop() // their shutdown logs count too
	}
	creds := []credential{
		tokenCredential("tunnel-nodes-sync ServiceAccount token", f.syncTokenValue),
		tokenCredential("coredns ServiceAccount token", f.corednsTokenValue),
		tokenCredential("installer ServiceAccount token", f.installerTokenValue),
		{what: "Secret value", forms: []string{f.secretValue, base64.StdEncoding.EncodeToString([]byte(f.secretValue))}},
	}
	creds = append(creds, clientCertCredentials(t, "tunnel-nodes-sync", f.syncCert)...)
	creds = append(creds, clientCertCredentials(t, "coredns", f.corednsCert)...)
	creds = append(creds, clientCertCredentials(t, "admin", cp.Kubeconfig)...)
	ca := string(cp.Config.CAData)
	scanner := newLeakScanner(creds, ca, base64.StdEncoding.EncodeToString(cp.Config.CAData))
	// The scanner finds what it must: a token in a header, a kubeconfig
	// file, a Secret inside a hex-dumped body, a piece of a key.
	probes := map[string]string{
		"a bearer header":                   "Authorization: Bearer " + f.syncTokenValue,
		"the Secret in a hex-dumped body":   hex.Dump([]byte(`{"data":{"password":"` + f.secretValue + `"}}`)),
		"the Secret in a base64 JSON value": `"password":"` + base64.StdEncoding.EncodeToString([]byte(f.secretValue)) + `"`,
	}
	for what, path := range map[string]string{"the coredns token kubeconfig": f.corednsToken, "the installer token kubeconfig": f.installerToken,
		"the sync certificate kubeconfig": f.syncCert, "the coredns certificate kubeconfig": f.corednsCert, "the admin kubeconfig": cp.Kubeconfig} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		probes[what] = string(data)
	}
	for _, c := range creds {
		form := c.forms[len(c.forms)-1]
		probes["the middle of the "+c.what] = "x" + form[len(form)/2:len(form)/2+leakWindow] + "x"
	}
	for what, probe := range probes {
		if len(scanner.scan(probe)) == 0 {
			t.Errorf("the scanner misses %s", what)
		}
	}

	total, leaked := 0, 0
	for _, l := range processes {
		out := l.p.Output()
		total += len(out)
		if leaks := scanner.scan(out); len(leaks) > 0 {
			leaked += len(leaks)
			t.Errorf("%s printed: %s", l.what, strings.Join(leaks, ", "))
		}
		var refused []string
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") && len(refused) < 5 {
				refused = append(refused, line)
			}
		}
		if len(refused) > 0 {
			t.Errorf("%s was refused a request it needs:\n%s", l.what, strings.Join(refused, "\n"))
		}
	}
	// The verbosity took effect: client-go printed the requests, with the
	// Authorization header masked.
	for _, l := range processes {
		out := l.p.Output()
		switch {
		case strings.HasPrefix(l.what, "coredns-yurt"):
			if !strings.Contains(out, `"A IN worker-1. udp`) {
				t.Errorf("%s: the log plugin logged no query", l.what)
			}
		case strings.Contains(l.what, "token"):
			if !strings.Contains(out, "Authorization: Bearer <masked>") {
				t.Errorf("%s: no request logged at -v=10 with the bearer token masked", l.what)
			}
		default:
			if !strings.Contains(out, "curl -v -X") {
				t.Errorf("%s: no request logged at -v=10", l.what)
			}
		}
	}
	t.Logf("%d processes (%d bytes of output) scanned for %d credentials in %d windows of %d characters: %d leaks",
		len(processes), total, len(creds), len(scanner), leakWindow, leaked)
	for _, c := range f.counts {
		t.Log(c)
	}
	t.Logf("the TestLeastPrivilege* tests took %s", time.Since(f.start).Round(time.Millisecond))
}
