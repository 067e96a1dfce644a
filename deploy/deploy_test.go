package deploy

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// namedGrants are a Role's grants by name: "resource/name" → its verbs.
func namedGrants(role *unstructured.Unstructured) map[string]string {
	named := map[string]string{}
	for _, r := range role.Object["rules"].([]any) {
		rule := r.(map[string]any)
		names, _, _ := unstructured.NestedStringSlice(rule, "resourceNames")
		verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
		resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
		for _, n := range names {
			named[resources[0]+"/"+n] = strings.Join(verbs, ",")
		}
	}
	return named
}

func TestRenderTunnelNodesSync(t *testing.T) {
	objs, err := Render(TunnelNodesSync)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range [][2]string{
		{"ServiceAccount", "tunnel-nodes-sync"},
		{"ClusterRole", "yurtdns:tunnel-nodes-sync"},
		{"ClusterRoleBinding", "yurtdns:tunnel-nodes-sync"},
		{"Role", "yurtdns:tunnel-nodes-sync"},
		{"RoleBinding", "yurtdns:tunnel-nodes-sync"},
		{"Deployment", "tunnel-nodes-sync"},
	} {
		o := find(objs, want[0], want[1])
		if o == nil {
			t.Errorf("%s %s not rendered", want[0], want[1])
			continue
		}
		if want[0] != "ClusterRole" && want[0] != "ClusterRoleBinding" && o.GetNamespace() != "kube-system" {
			t.Errorf("%s %s in namespace %q", want[0], want[1], o.GetNamespace())
		}
	}
	if len(objs) != 6 {
		t.Errorf("rendered %d objects, want 6", len(objs))
	}

	// Names the sync reads and writes, and with which verbs: kube-dns only
	// patched (its topology annotation), never updated.
	named := namedGrants(find(objs, "Role", "yurtdns:tunnel-nodes-sync"))
	want := map[string]string{
		"configmaps/yurt-tunnel-nodes":          "get,list,watch,update",
		"configmaps/yurt-tunnel-server-cfg":     "get,list,watch",
		"services/x-tunnel-server-internal-svc": "get,list,watch,update",
		"services/kube-dns":                     "get,list,watch,patch",
		"leases/tunnel-nodes-sync":              "get,update",
	}
	if !maps.Equal(named, want) {
		t.Errorf("named grants %v\nwant %v", named, want)
	}

	d := find(objs, "Deployment", "tunnel-nodes-sync")
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	nonRoot, _, _ := unstructured.NestedBool(d.Object, "spec", "template", "spec", "securityContext", "runAsNonRoot")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if replicas != 2 || !nonRoot || len(containers) != 1 {
		t.Fatalf("deployment: replicas %d, runAsNonRoot %v, %d containers", replicas, nonRoot, len(containers))
	}
	c := containers[0].(map[string]any)
	if args, _, _ := unstructured.NestedStringSlice(c, "args"); !slices.Contains(args, "--kube-dns-topology=openyurt.io/nodepool") {
		t.Errorf("args %v do not keep kube-dns's topology annotation", args)
	}
	readOnly, _, _ := unstructured.NestedBool(c, "securityContext", "readOnlyRootFilesystem")
	drop, _, _ := unstructured.NestedStringSlice(c, "securityContext", "capabilities", "drop")
	if !readOnly || len(drop) != 1 || drop[0] != "ALL" {
		t.Errorf("container security context: readOnlyRootFilesystem %v, drop %v", readOnly, drop)
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if _, ok := c[probe]; !ok {
			t.Errorf("no %s", probe)
		}
	}
}

// TestSidecarComponent adds the sidecar component to a kustomization of
// yurt-tunnel-server, as a user would, and checks the container and the
// bindings to the tunnel server's ServiceAccount.
func TestSidecarComponent(t *testing.T) {
	objs, err := RenderSidecar([]byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: yurt-tunnel-server
spec:
  selector:
    matchLabels: {k8s-app: yurt-tunnel-server}
  template:
    metadata:
      labels: {k8s-app: yurt-tunnel-server}
    spec:
      serviceAccountName: yurt-tunnel-server
      containers:
      - name: yurt-tunnel-server
        image: openyurt/yurt-tunnel-server:latest
`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	for _, want := range []string{"Deployment/yurt-tunnel-server", "Role/yurtdns:tunnel-nodes-sync", "ClusterRole/yurtdns:tunnel-nodes-sync",
		"RoleBinding/yurtdns:tunnel-nodes-sync-sidecar", "ClusterRoleBinding/yurtdns:tunnel-nodes-sync-sidecar"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s missing from %v", want, names)
		}
	}
	d := find(objs, "Deployment", "yurt-tunnel-server")
	if d.GetNamespace() != "kube-system" {
		t.Errorf("Deployment namespace %q", d.GetNamespace())
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	var containerNames []string
	for _, c := range containers {
		containerNames = append(containerNames, c.(map[string]any)["name"].(string))
	}
	if !slices.Contains(containerNames, "tunnel-nodes-sync") || !slices.Contains(containerNames, "yurt-tunnel-server") {
		t.Errorf("sidecar not added next to the tunnel server: containers %v", containerNames)
	}
}

func TestRenderCoreDNSYurt(t *testing.T) {
	objs, err := Render(CoreDNSYurt)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range [][2]string{{"Role", "yurtdns:coredns"}, {"RoleBinding", "yurtdns:coredns"}, {"ConfigMap", "coredns-yurt"}, {"DaemonSet", "coredns"}} {
		if o := find(objs, want[0], want[1]); o == nil || o.GetNamespace() != "kube-system" {
			t.Errorf("%s %s not rendered in kube-system", want[0], want[1])
		}
	}
	rbac, err := Render(CoreDNSRBAC)
	if err != nil || len(rbac) != 2 {
		t.Errorf("rbac part: %d objects, %v", len(rbac), err)
	}
}

// TestRenderRaven: the Raven overlay runs the sync with --profile raven and
// grants it Raven's objects by name only — the records ConfigMap read and
// written, raven-cfg and the proxy Service only read (its ports are Raven's)
// — and nothing of yurt-tunnel's; raven-proxy-dns may read the two objects.
func TestRenderRaven(t *testing.T) {
	objs, err := Render(TunnelNodesSyncRaven)
	if err != nil {
		t.Fatal(err)
	}
	d := find(objs, "Deployment", "tunnel-nodes-sync")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if !slices.Contains(args, "--profile=raven") {
		t.Errorf("args %v lack --profile=raven", args)
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--kube-dns-topology") }) {
		t.Errorf("args %v keep kube-dns's annotation: Raven's layout does not set it", args)
	}
	named := namedGrants(find(objs, "Role", "yurtdns:tunnel-nodes-sync"))
	want := map[string]string{
		"configmaps/edge-tunnel-nodes":        "get,list,watch,update",
		"configmaps/raven-cfg":                "get,list,watch",
		"services/x-raven-proxy-internal-svc": "get,list,watch",
		"leases/tunnel-nodes-sync":            "get,update",
	}
	if !maps.Equal(named, want) {
		t.Errorf("named grants %v\nwant %v", named, want)
	}

	rbac, err := Render(RavenProxyDNSRBAC)
	if err != nil {
		t.Fatal(err)
	}
	role, binding := find(rbac, "Role", "yurtdns:raven-proxy-dns"), find(rbac, "RoleBinding", "yurtdns:raven-proxy-dns")
	if role == nil || binding == nil || len(rbac) != 2 || role.GetNamespace() != "kube-system" {
		t.Fatalf("rendered %v", rbac)
	}
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if sa := subjects[0].(map[string]any)["name"]; len(subjects) != 1 || sa != "raven-proxy-dns" {
		t.Errorf("bound to %v, want raven-proxy-dns's ServiceAccount", subjects)
	}
}
