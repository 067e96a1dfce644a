package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Yurthub is OpenYurt's yurthub (built by `make openyurt` into bin/k8s) running
// in edge mode in front of the harness apiserver, as on an edge node.
type Yurthub struct {
	*Process
	// NodeName is the edge node yurthub runs for.
	NodeName string
	// SecureURL is yurthub's HTTPS proxy, where a pod's in-cluster config
	// points on an edge node; CAData verifies its serving certificate.
	SecureURL string
	CAData    []byte
	// ProxyURL is its plain-HTTP proxy, where the kubelet (and a host-network
	// client with no credentials) reaches the apiserver with the node's
	// identity.
	ProxyURL string
	// ReadyURL is yurthub's /v1/readyz, HealthzURL its /v1/healthz (up
	// whether or not the cloud is), MetricsURL its /metrics.
	ReadyURL, HealthzURL, MetricsURL string
	// Link is the node's link to the cloud: yurthub reaches the apiserver
	// through it (at ServerAddr), and a test cuts it to cut the node off
	// while the apiserver keeps serving everyone else.
	Link       *Proxy
	ServerAddr string
	// RootDir holds its certificates and kubeconfig; CacheDir its disk cache.
	RootDir, CacheDir string
	// HeartbeatInterval is how often it probes the apiserver (its default);
	// after an outage it needs HealthyThreshold good probes in a row.
	HeartbeatInterval time.Duration
	HealthyThreshold  int

	bin  string
	args []string
}

// yurthub's defaults (cmd/yurthub/app/options): the tests keep them, so the
// reconnect they measure is the one an edge node sees.
const (
	yurthubHeartbeatInterval = 10 * time.Second
	yurthubHealthyThreshold  = 2
	// yurthubDummyIP is its default dummy-interface address, which its
	// serving certificate carries even where the interface is off.
	yurthubDummyIP = "169.254.2.1"
	// yurthubNodePool is the node's pool (yurthub requires one).
	yurthubNodePool = "edge-pool"
)

// StartYurthub prepares yurthub's root directory as its token bootstrap and
// CSR flow leave it on an edge node — yurthub.conf, pki/ca.crt, the client
// certificate system:node:NODE (groups openyurt:yurthub, system:nodes) issued
// by the harness apiserver's client CA, and the serving certificate — grants
// the node identity what a cluster gives it (the system:node role in place
// of the Node authorizer, and upstream's yurt-hub ClusterRole), starts it on
// free loopback ports and waits until it is ready. Its cache agents are its
// defaults (kubelet, kube-proxy, flanneld, coredns, ...). No dummy
// interface: nothing outside loopback is touched.
func (cp *ControlPlane) StartYurthub(t TB, nodeName string) *Yurthub {
	t.Helper()
	assets, err := AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(assets, "yurthub")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("yurthub not found in %s: run `make openyurt` (%v)", assets, err)
	}
	cp.grantYurthub(t)
	cp.createNodePool(t, yurthubNodePool, nodeName)

	root, cache := t.TempDir(), t.TempDir()
	pki := filepath.Join(root, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	user, err := cp.env.AddUser(envtest.User{Name: "system:node:" + nodeName, Groups: []string{"openyurt:yurthub", "system:nodes"}}, nil)
	if err != nil {
		t.Fatalf("issuing yurthub's client certificate: %v", err)
	}
	clientCfg := user.Config()
	writeCertPair(t, pki, "yurthub", append(clientCfg.CertData, clientCfg.KeyData...))
	writePrivate(t, filepath.Join(pki, "ca.crt"), cp.Config.CAData)

	// yurthub reaches the apiserver over the node's link, and throws away
	// a kubeconfig of another server than its --server-addr.
	link := cp.newProxy(t)
	serverAddr := "https://" + link.Addr
	hubConf := clientcmdapi.NewConfig()
	hubConf.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: serverAddr, CertificateAuthorityData: cp.Config.CAData}
	current := filepath.Join(pki, "yurthub-current.pem")
	hubConf.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: current, ClientKey: current}
	hubConf.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}
	hubConf.CurrentContext = "default-context"
	writeKubeconfigFile(t, filepath.Join(root, "yurthub.conf"), hubConf)
	// The bootstrap kubeconfig yurtadm join leaves; yurthub reads it only
	// to ask for a certificate, and its certificate is current.
	bootstrap := clientcmdapi.NewConfig()
	bootstrap.Clusters["kubernetes"] = &clientcmdapi.Cluster{Server: serverAddr, CertificateAuthorityData: cp.Config.CAData}
	bootstrap.AuthInfos["token-bootstrap-client"] = &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"}
	bootstrap.Contexts["token-bootstrap-client@kubernetes"] = &clientcmdapi.Context{Cluster: "kubernetes", AuthInfo: "token-bootstrap-client"}
	bootstrap.CurrentContext = "token-bootstrap-client@kubernetes"
	bootstrapFile := filepath.Join(root, "bootstrap-hub.conf")
	writeKubeconfigFile(t, bootstrapFile, bootstrap)

	// The serving certificate yurthub asks the kubelet-serving signer for:
	// its CSR template (certificate/server) names the kubernetes Service's
	// ClusterIP, the dummy, bind and node IPs and the kubernetes DNS names;
	// one missing them would make it ask again.
	kubeSvc, err := cp.Client.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the kubernetes Service for yurthub's serving certificate: %v", err)
	}
	caPEM, servingPEM := servingCertificate(t, "system:node:"+nodeName,
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP(kubeSvc.Spec.ClusterIP), net.ParseIP(yurthubDummyIP), net.IPv4(127, 0, 0, 1)})
	writeCertPair(t, pki, "yurthub-server", servingPEM)

	servePort, proxyPort, securePort, muxPort := FreePort(t), FreePort(t), FreePort(t), FreePort(t)
	h := &Yurthub{
		NodeName:          nodeName,
		SecureURL:         fmt.Sprintf("https://127.0.0.1:%d", securePort),
		CAData:            caPEM,
		ProxyURL:          fmt.Sprintf("http://127.0.0.1:%d", proxyPort),
		ReadyURL:          fmt.Sprintf("http://127.0.0.1:%d/v1/readyz", servePort),
		HealthzURL:        fmt.Sprintf("http://127.0.0.1:%d/v1/healthz", servePort),
		MetricsURL:        fmt.Sprintf("http://127.0.0.1:%d/metrics", servePort),
		Link:              link,
		ServerAddr:        serverAddr,
		RootDir:           root,
		CacheDir:          cache,
		HeartbeatInterval: yurthubHeartbeatInterval,
		HealthyThreshold:  yurthubHealthyThreshold,
		bin:               bin,
	}
	h.args = []string{
		"--working-mode=edge",
		"--node-name=" + nodeName,
		"--nodepool-name=" + yurthubNodePool,
		"--server-addr=" + h.ServerAddr,
		"--bootstrap-file=" + bootstrapFile,
		"--root-dir=" + root,
		"--disk-cache-path=" + cache,
		"--bind-address=127.0.0.1",
		"--bind-proxy-address=127.0.0.1",
		"--node-ip=127.0.0.1",
		fmt.Sprint("--serve-port=", servePort),
		fmt.Sprint("--proxy-port=", proxyPort),
		fmt.Sprint("--proxy-secure-port=", securePort),
		fmt.Sprint("--multiplexer-port=", muxPort),
		"--enable-dummy-if=false",
		"--profiling=false",
		"--v=2",
	}
	h.Process = StartProcess(t, bin, h.args...)
	h.WaitHTTP200(t, h.ReadyURL, 60*time.Second)
	return h
}

// Restart stops yurthub and starts it again with its disk cache, as a
// reboot of the node does, and waits until it serves (/v1/healthz: cut off
// from the cloud it is not ready until it has reached it).
func (h *Yurthub) Restart(t TB) {
	t.Helper()
	h.Stop()
	h.Process = StartProcess(t, h.bin, h.args...)
	h.WaitHTTP200(t, h.HealthzURL, 60*time.Second)
}

// CloudHealthy reports whether yurthub considers the apiserver reachable
// (it proxies to it) or not (it serves from its cache). Its gauge is set on
// the first change; until then the apiserver is healthy, as at its start
// (not after Restart while cut off: see HealthySample).
func (h *Yurthub) CloudHealthy(t TB) bool {
	t.Helper()
	return Metric(t, h.MetricsURL, h.HealthySample()) != 0
}

// HealthySample is yurthub's gauge of the apiserver's health: 1 healthy, 0
// not, absent until the first change. A yurthub started cut off is unhealthy
// with the gauge absent, and sets it to 1 once the apiserver answers its
// heartbeats (HealthyThreshold in a row).
func (h *Yurthub) HealthySample() string {
	return fmt.Sprintf("node_yurthub_server_healthy_status{server=%q}", h.ServerAddr)
}

// Kubeconfig is a kubeconfig that reaches the apiserver through yurthub's
// HTTPS proxy with a bearer token, as a pod's in-cluster config does on an
// edge node (yurthub forwards the token; the apiserver sees the pod's
// ServiceAccount).
func (h *Yurthub) Kubeconfig(t TB, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["yurthub"] = &clientcmdapi.Cluster{Server: h.SecureURL, CertificateAuthorityData: h.CAData}
	cfg.AuthInfos["pod"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["yurthub"] = &clientcmdapi.Context{Cluster: "yurthub", AuthInfo: "pod"}
	cfg.CurrentContext = "yurthub"
	path := filepath.Join(t.TempDir(), "yurthub-kubeconfig")
	writeKubeconfigFile(t, path, cfg)
	return path
}

// grantYurthub gives the group system:nodes what a cluster gives nodes: the
// bootstrap ClusterRole system:node (the Node authorizer's grant; envtest
// runs RBAC only) and upstream's yurt-hub ClusterRole (charts/yurthub).
func (cp *ControlPlane) grantYurthub(t TB) {
	t.Helper()
	ctx := context.Background()
	rbac := cp.Client.RbacV1()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "yurt-hub"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps.openyurt.io"}, Resources: []string{"nodepools"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"yurt-coordinator-yurthub-certs"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"endpoints"}, Verbs: []string{"list", "watch"}},
	}}
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ClusterRole yurt-hub: %v", err)
	}
	nodes := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}}
	for _, name := range []string{"yurt-hub", "system:node"} {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "yurtdns-harness:" + name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: nodes}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("binding ClusterRole %s to system:nodes: %v", name, err)
		}
	}
}

// createNodePool installs OpenYurt's NodePool CRD (apps.openyurt.io/v1beta2;
// only what yurthub reads: schemaless) if missing, and a pool holding the
// node, as yurt-manager keeps it. yurthub's resource filters wait for the
// pools before it reports ready.
func (cp *ControlPlane) createNodePool(t TB, pool, node string) {
	t.Helper()
	ctx := context.Background()
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "nodepools.apps.openyurt.io"},
		"spec": map[string]any{
			"group": "apps.openyurt.io", "scope": "Cluster",
			"names": map[string]any{"kind": "NodePool", "listKind": "NodePoolList", "plural": "nodepools", "singular": "nodepool"},
			"versions": []any{map[string]any{"name": "v1beta2", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the NodePool CRD: %v", err)
	}
	np := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.openyurt.io/v1beta2", "kind": "NodePool",
		"metadata": map[string]any{"name": pool},
		"spec":     map[string]any{"type": "Edge"},
	}}
	// Until the CRD is established the apiserver does not know the kind.
	Eventually(t, 30*time.Second, func() error {
		if err := c.Create(ctx, np.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
	if err := c.Get(ctx, client.ObjectKey{Name: pool}, np); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedStringSlice(np.Object, []string{node}, "status", "nodes"); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(ctx, np); err != nil {
		t.Fatalf("writing NodePool %s's nodes: %v", pool, err)
	}
}

// servingCertificate issues a serving certificate (cert and key PEM) from a
// CA made for the test, which stands in for the cluster's kubelet-serving
// signer (envtest keeps its CA keys to itself, and runs no signer).
func servingCertificate(t TB, commonName string, dnsNames []string, ips []net.IP) (caPEM, pairPEM []byte) {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "harness kubelet-serving signer"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: commonName, Organization: []string{"system:nodes"}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour), DNSNames: dnsNames, IPAddresses: ips,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	pairPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	return caPEM, pairPEM
}

// writeCertPair stores a certificate and key as client-go's certificate
// FileStore does: PREFIX-DATE.pem, and PREFIX-current.pem linking to it.
func writeCertPair(t TB, dir, prefix string, pairPEM []byte) {
	t.Helper()
	dated := fmt.Sprintf("%s-%s.pem", prefix, time.Now().Format("2006-01-02-15-04-05"))
	writePrivate(t, filepath.Join(dir, dated), pairPEM)
	if err := os.Symlink(dated, filepath.Join(dir, prefix+"-current.pem")); err != nil {
		t.Fatal(err)
	}
}

func writeKubeconfigFile(t TB, path string, cfg *clientcmdapi.Config) {
	t.Helper()
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	writePrivate(t, path, data)
}

func writePrivate(t TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
