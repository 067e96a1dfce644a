package steps

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/yurtdns/yurtdns/deploy"
	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/nodelocal"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// podUnderTest is one pod template yurtdns ships or builds.
type podUnderTest struct {
	where string
	spec  corev1.PodSpec
	// containers limits the check to these containers (the sidecar's pod
	// belongs to the tunnel server); empty means every container.
	containers []string
	// mayAdd are the capabilities a container may add (drop ALL stays required).
	mayAdd []corev1.Capability
	// The node-local cache's exceptions: it shares the host's network
	// namespace (it answers on the node's link-local address), and rootWith
	// names the containers that run as root, each with exactly the
	// capabilities it may add (the init container that puts the address on lo).
	hostNetwork bool
	rootWith    map[string][]corev1.Capability
}

// restricted checks one container against the least-privilege baseline
// (Pod Security "restricted" plus a read-only root filesystem and an
// explicit non-zero user); pod-level settings count where the container
// leaves them unset, as the kubelet applies them.
func restricted(p podUnderTest, c *corev1.Container) []string {
	pod, mayAdd := &p.spec, p.mayAdd
	rootCaps, root := p.rootWith[c.Name]
	if root {
		mayAdd = rootCaps
	}
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	var bad []string
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	if (nonRoot == nil || !*nonRoot) && !root {
		bad = append(bad, "runAsNonRoot is not true")
	}
	user := sc.RunAsUser
	if user == nil {
		user = psc.RunAsUser
	}
	if (user == nil || *user == 0) && !root {
		bad = append(bad, fmt.Sprintf("runAsUser %v is not a non-zero user", derefOr(user, "unset")))
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		bad = append(bad, "readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		bad = append(bad, "allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		bad = append(bad, "privileged")
	}
	bad = append(bad, capabilities(sc, mayAdd)...)
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad = append(bad, fmt.Sprintf("seccompProfile %v is not RuntimeDefault", seccomp))
	}
	if (pod.HostNetwork && !p.hostNetwork) || pod.HostPID || pod.HostIPC {
		bad = append(bad, "shares a host namespace")
	}
	return bad
}

func capabilities(sc *corev1.SecurityContext, mayAdd []corev1.Capability) []string {
	var bad []string
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		bad = append(bad, "capabilities do not drop ALL")
	}
	if sc.Capabilities != nil {
		for _, c := range sc.Capabilities.Add {
			if !slices.Contains(mayAdd, c) {
				bad = append(bad, fmt.Sprintf("adds capability %s", c))
			}
		}
	}
	return bad
}

func derefOr[T any](p *T, unset string) any {
	if p == nil {
		return unset
	}
	return *p
}

// templateOf returns the pod template of a workload object (Deployment,
// DaemonSet, StatefulSet, Job, ...), or false for other kinds.
func templateOf(t *testing.T, o *unstructured.Unstructured) (corev1.PodSpec, bool) {
	t.Helper()
	tmpl, found, err := unstructured.NestedMap(o.Object, "spec", "template")
	if err != nil || !found {
		return corev1.PodSpec{}, false
	}
	var pt corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, &pt); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return pt.Spec, true
}

// sidecarPod renders deploy/tunnel-nodes-sync/sidecar into a minimal
// yurt-tunnel-server Deployment, as a user's kustomization would.
func sidecarPod(t *testing.T) corev1.PodSpec {
	t.Helper()
	objs, err := deploy.RenderSidecar([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: yurt-tunnel-server\nspec:\n" +
		"  selector: {matchLabels: {k8s-app: yurt-tunnel-server}}\n  template:\n    metadata: {labels: {k8s-app: yurt-tunnel-server}}\n" +
		"    spec:\n      containers:\n      - {name: yurt-tunnel-server, image: openyurt/yurt-tunnel-server:latest}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if spec, ok := templateOf(t, o); ok && o.GetKind() == "Deployment" {
			return spec
		}
	}
	t.Fatal("the sidecar kustomization rendered no Deployment")
	return corev1.PodSpec{}
}

// TestLeastPrivilegeSecurityContext: every pod template yurtdns ships or
// builds runs non-root (runAsNonRoot and a non-zero runAsUser), with a
// read-only root filesystem, no privilege escalation, every capability
// dropped and the RuntimeDefault seccomp profile, sharing no host namespace:
// each kustomization in deploy.Dirs, the sidecar component, and the CoreDNS
// DaemonSet install builds from kubeadm's Deployment. coredns-yurt alone may
// add NET_BIND_SERVICE (it serves port 53, as kubeadm's CoreDNS does).
//
// The one exception is the control-plane Jobs (install --control-plane-jobs):
// they edit root-owned files in the host's /etc/kubernetes/manifests, so they
// run as root (runAsUser 0) with a hostPath mount; they are checked for
// everything else: no added capability, drop ALL, no privilege escalation,
// read-only root filesystem, RuntimeDefault seccomp, not privileged.
func TestLeastPrivilegeSecurityContext(t *testing.T) {
	coreDNSCaps := []corev1.Capability{"NET_BIND_SERVICE"}
	var pods []podUnderTest
	for _, dir := range deploy.Dirs {
		objs, err := deploy.Render(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		n := 0
		for _, o := range objs {
			spec, ok := templateOf(t, o)
			if !ok {
				continue
			}
			n++
			p := podUnderTest{where: fmt.Sprintf("deploy/%s %s %s", dir, o.GetKind(), o.GetName()), spec: spec}
			switch dir {
			case deploy.CoreDNSYurt:
				p.mayAdd = coreDNSCaps
			case deploy.NodeLocalDNS:
				p.mayAdd, p.hostNetwork = coreDNSCaps, true
				p.rootWith = map[string][]corev1.Capability{"setup": {"NET_ADMIN"}}
			case deploy.NodeLocalDNSLeftover:
				p.mayAdd, p.hostNetwork = coreDNSCaps, true
				p.rootWith = map[string][]corev1.Capability{"setup": {"NET_ADMIN"}, "linger": {"NET_ADMIN"}}
			}
			pods = append(pods, p)
		}
		if n == 0 {
			t.Errorf("deploy/%s renders no pod template", dir)
		}
	}
	pods = append(pods, podUnderTest{where: "deploy/tunnel-nodes-sync/sidecar container tunnel-nodes-sync",
		spec: sidecarPod(t), containers: []string{"tunnel-nodes-sync"}})

	var kubeadm appsv1.Deployment
	kubeadmObject(t, "coredns.yaml", "Deployment", &kubeadm)
	ds, err := daemonSetFromDeployment(&kubeadm, "yurtdns/coredns-yurt:latest")
	if err != nil {
		t.Fatal(err)
	}
	pods = append(pods, podUnderTest{where: "install's coredns DaemonSet (from kubeadm's Deployment)", spec: ds.Spec.Template.Spec, mayAdd: coreDNSCaps})

	checked := 0
	for _, p := range pods {
		for _, c := range slices.Concat(p.spec.InitContainers, p.spec.Containers) {
			if len(p.containers) > 0 && !slices.Contains(p.containers, c.Name) {
				continue
			}
			checked++
			for _, problem := range restricted(p, &c) {
				t.Errorf("%s, container %s: %s", p.where, c.Name, problem)
			}
		}
	}
	if checked < len(pods) {
		t.Errorf("checked %d containers in %d pod templates", checked, len(pods))
	}
	t.Logf("%d containers in %d pod templates checked", checked, len(pods))

	// The exceptions: Jobs that edit root-owned files of a node. The
	// control-plane Jobs run as root, and nothing more; the node-local-dns
	// step's Jobs also share the node's network (and, for the kubelet, PID)
	// namespace and add what restarting the kubelet or removing the
	// address needs.
	type nodeJob struct {
		job      *batchv1.Job
		caps     []corev1.Capability
		hostNS   bool
		hostPath string
	}
	var jobs []nodeJob
	for _, action := range []string{"patch", "restore"} {
		jobs = append(jobs, nodeJob{job: manifestJob("master-1", action, "yurtdns/tunnel-nodes-sync:latest", "/etc/kubernetes/patches", false, engine.Options{}), hostPath: hostKubernetesDir})
	}
	for _, a := range []nodeLocalAction{switchKubelet, restoreKubelet} {
		jobs = append(jobs, nodeJob{job: kubeletJob("worker-1", a, "yurtdns/tunnel-nodes-sync:latest", engine.Options{}, []netip.Addr{nodelocal.Address}),
			caps: []corev1.Capability{"KILL", "SYS_PTRACE"}, hostNS: true, hostPath: hostKubeletDir})
	}
	jobs = append(jobs, nodeJob{job: kubeletJob("worker-1", teardownNode, "yurtdns/tunnel-nodes-sync:latest", engine.Options{}, []netip.Addr{nodelocal.Address}),
		caps: []corev1.Capability{"NET_ADMIN"}, hostNS: true})
	for _, j := range jobs {
		job := j.job
		spec := job.Spec.Template.Spec
		for _, c := range spec.Containers {
			where := fmt.Sprintf("Job %s, container %s", job.Name, c.Name)
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s: no security context", where)
				continue
			}
			problems := capabilities(sc, j.caps)
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				problems = append(problems, "allowPrivilegeEscalation is not false")
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				problems = append(problems, "readOnlyRootFilesystem is not true")
			}
			if sc.Privileged != nil && *sc.Privileged {
				problems = append(problems, "privileged")
			}
			if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				problems = append(problems, "seccompProfile is not RuntimeDefault")
			}
			if ((spec.HostNetwork || spec.HostPID) && !j.hostNS) || spec.HostIPC {
				problems = append(problems, "shares a host namespace")
			}
			for _, v := range spec.Volumes {
				if v.HostPath != nil && v.HostPath.Path != j.hostPath {
					problems = append(problems, "mounts host path "+v.HostPath.Path)
				}
			}
			for _, problem := range problems {
				t.Errorf("%s: %s", where, problem)
			}
		}
	}
}
