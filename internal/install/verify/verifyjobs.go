package verify

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/yurtdns/yurtdns/internal/install/engine"
	"github.com/yurtdns/yurtdns/internal/install/kube"
	"github.com/yurtdns/yurtdns/internal/layout"
	"github.com/yurtdns/yurtdns/internal/staticpod"
	"github.com/yurtdns/yurtdns/internal/tunnelnodes"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// `status --verify-dns-from-control-plane`: a Job on each control-plane
// node resolves every node name with the resolver kube-apiserver has there
// (host network, the dnsPolicy and dnsConfig of its kube-apiserver pod) and
// prints what it got against what the profile's rules say; status reads
// that from the pod's log.

// VerifyDNSCommand is the hidden subcommand the Jobs run.
const VerifyDNSCommand = "verify-node-dns"

// verifyDNSName names the Jobs' ServiceAccount and its RBAC, which exist
// only while the check runs.
const verifyDNSName = "yurtdns-verify-dns"

// verifySummaryPrefix starts the last line of the check's output: the count
// of wrong answers, which status reads back from the pod log.
const verifySummaryPrefix = "yurtdns verify-node-dns: wrong answers: "

// VerifySummary is the last line VerifyDNSCommand prints.
func VerifySummary(mismatches int) string {
	return verifySummaryPrefix + strconv.Itoa(mismatches)
}

// parseVerifyLog splits a check's output into its report and the count of
// its summary line; without that line the check did not finish.
func parseVerifyLog(log string) (report string, mismatches int, err error) {
	log = strings.TrimRight(log, "\n")
	i := strings.LastIndex(log, "\n") + 1
	n, err := strconv.Atoi(strings.TrimPrefix(log[i:], verifySummaryPrefix))
	if !strings.HasPrefix(log[i:], verifySummaryPrefix) || err != nil || n < 0 {
		return "", 0, fmt.Errorf("the check did not finish; its output:\n%s", log)
	}
	return log[:i], n, nil
}

// verifyRBAC lets the Jobs list nodes and get what the profile's rules
// read (the tunnel Service; under Raven its proxy Service and raven-cfg),
// and nothing else.
func verifyRBAC(l layout.Layout) []client.Object {
	read := l.Reads()
	meta := func(ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: verifyDNSName, Namespace: ns, Labels: map[string]string{engine.ManagedByLabel: "yurtdns", kube.JobLabel: "verify-dns"}}
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: verifyDNSName, Namespace: tunnelnodes.Namespace}}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta(tunnelnodes.Namespace)},
		&rbacv1.ClusterRole{ObjectMeta: meta(""), Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: meta(""), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: verifyDNSName}},
		&rbacv1.Role{ObjectMeta: meta(tunnelnodes.Namespace), Rules: read},
		&rbacv1.RoleBinding{ObjectMeta: meta(tunnelnodes.Namespace), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: verifyDNSName}},
	}
}

// apiserverDNS is the DNS settings of kube-apiserver's pod on node (its
// mirror pod): what its resolv.conf is made from. Without one, the
// control-plane step's: ClusterFirstWithHostNet.
func apiserverDNS(ctx context.Context, env *engine.Env, node string) (corev1.DNSPolicy, *corev1.PodDNSConfig, error) {
	pod := &corev1.Pod{}
	err := env.Client.Get(ctx, kube.Key(staticpod.MirrorPodName("kube-apiserver", node)), pod)
	switch {
	case apierrors.IsNotFound(err):
		return corev1.DNSClusterFirstWithHostNet, nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("reading kube-apiserver's pod on %s: %w", node, err)
	case pod.Spec.DNSPolicy == "":
		return corev1.DNSClusterFirst, pod.Spec.DNSConfig, nil
	}
	return pod.Spec.DNSPolicy, pod.Spec.DNSConfig, nil
}

// verifyJob runs the check on node, in kube-apiserver's network and DNS view.
func verifyJob(node, image, edgeSelector, profile string, policy corev1.DNSPolicy, dnsConfig *corev1.PodDNSConfig, timeout time.Duration) *batchv1.Job {
	job := kube.NodeJob("yurtdns-verify-dns-"+kube.NodeHash(node), "verify-dns", "verify-dns", image,
		[]string{VerifyDNSCommand, "--edge-node-selector", edgeSelector, "--profile", profile})
	deadline := int64(timeout.Seconds())
	ttl := int32(600) // cleans up after a status that was killed
	job.Spec.ActiveDeadlineSeconds, job.Spec.TTLSecondsAfterFinished = &deadline, &ttl
	spec := &job.Spec.Template.Spec
	spec.HostNetwork = true
	spec.DNSPolicy, spec.DNSConfig = policy, dnsConfig
	spec.ServiceAccountName = verifyDNSName
	// Through the scheduler (not nodeName), so a node it cannot run on says so.
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
	kube.HardenPod(spec)
	kube.HardenContainer(&spec.Containers[0])
	return job
}

// VerifyDNSFromControlPlane runs the check in a Job on each control-plane
// node and prints each node's report. It returns the count of wrong
// answers and of nodes where the check could not run (each with its
// reason). The Jobs and their RBAC are deleted afterwards, whatever happened.
func VerifyDNSFromControlPlane(ctx context.Context, env *engine.Env, edgeSelector string, out io.Writer) (mismatches, failed int, err error) {
	l, err := layout.Named(env.Options.Profile)
	if err != nil {
		return 0, 0, err
	}
	nodes, err := kube.ControlPlaneNodes(ctx, env)
	if err != nil {
		return 0, 0, err
	}
	image, err := kube.SyncImage(env)
	if err != nil {
		return 0, 0, err
	}
	// What an interrupted run left goes first; all of it goes at the end,
	// also when ctx is cancelled.
	if err := cleanupVerify(ctx, env, l); err != nil {
		return 0, 0, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if cerr := cleanupVerify(cctx, env, l); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for _, o := range verifyRBAC(l) {
		if err := env.Client.Create(ctx, o); err != nil {
			return 0, 0, fmt.Errorf("creating %T %s for the check: %w", o, verifyDNSName, err)
		}
	}
	var jobs []*batchv1.Job
	for _, n := range nodes {
		policy, dnsConfig, err := apiserverDNS(ctx, env, n)
		if err != nil {
			return 0, 0, err
		}
		j := verifyJob(n, image, edgeSelector, l.Name, policy, dnsConfig, env.Options.Timeout)
		if err := env.Client.Create(ctx, j); err != nil {
			return 0, 0, fmt.Errorf("creating Job %s: %w", j.Name, err)
		}
		jobs = append(jobs, j)
	}
	for i, j := range jobs {
		fmt.Fprintf(out, "From control-plane node %s (its own resolver, as kube-apiserver's):\n", nodes[i])
		report, wrong, err := verifyJobResult(ctx, env, j.Name)
		if err != nil {
			fmt.Fprintf(out, "  CHECK FAILED: %v\n", err)
			failed++
			continue
		}
		fmt.Fprint(out, report)
		mismatches += wrong
	}
	return mismatches, failed, nil
}

// verifyJobResult waits for the Job and reads its report from the pod log.
func verifyJobResult(ctx context.Context, env *engine.Env, job string) (report string, mismatches int, err error) {
	if err := kube.WaitJobComplete(ctx, env, job); err != nil {
		return "", 0, err
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(tunnelnodes.Namespace), client.MatchingLabels{"batch.kubernetes.io/job-name": job}); err != nil {
		return "", 0, err
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded {
			continue
		}
		log, err := env.Clientset.CoreV1().Pods(tunnelnodes.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return "", 0, fmt.Errorf("reading the log of pod %s: %w", p.Name, err)
		}
		return parseVerifyLog(string(log))
	}
	return "", 0, fmt.Errorf("Job %s completed, but no succeeded pod of it is left to read", job)
}

// cleanupVerify deletes the check's Jobs (with their pods) and RBAC.
func cleanupVerify(ctx context.Context, env *engine.Env, l layout.Layout) error {
	jobs := &batchv1.JobList{}
	if err := env.Client.List(ctx, jobs, client.InNamespace(tunnelnodes.Namespace), client.MatchingLabels{kube.JobLabel: "verify-dns"}); err != nil {
		return fmt.Errorf("listing the check's Jobs: %w", err)
	}
	var objs []client.Object
	for i := range jobs.Items {
		objs = append(objs, &jobs.Items[i])
	}
	for _, o := range append(objs, verifyRBAC(l)...) {
		err := env.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cleaning up %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}
