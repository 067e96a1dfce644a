package harness

import (
	"context"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountToken creates the ServiceAccount namespace/name if it does
// not exist and asks the apiserver's TokenRequest API for a bearer token of
// it (an hour long, the apiserver's own audience), as the kubelet does for a
// pod's projected token.
func (cp *ControlPlane) ServiceAccountToken(t TB, namespace, name string) string {
	t.Helper()
	ctx := context.Background()
	sas := cp.Client.CoreV1().ServiceAccounts(namespace)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := sas.Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ServiceAccount %s/%s: %v", namespace, name, err)
	}
	seconds := int64(3600)
	tr, err := sas.CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	if tr.Status.Token == "" {
		t.Fatalf("TokenRequest for ServiceAccount %s/%s returned no token", namespace, name)
	}
	return tr.Status.Token
}

// ServiceAccountTokenKubeconfig returns the path of a kubeconfig that
// authenticates with a bearer token of the ServiceAccount namespace/name
// (created if missing; see ServiceAccountToken), exactly as a pod's
// in-cluster config does, and the token itself (to check it never shows in
// logs). The file is private to the test (mode 0600).
func (cp *ControlPlane) ServiceAccountTokenKubeconfig(t TB, namespace, name string) (path, token string) {
	t.Helper()
	token = cp.ServiceAccountToken(t, namespace, name)
	user := "system:serviceaccount:" + namespace + ":" + name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["harness"] = &clientcmdapi.Cluster{
		Server:                   cp.Config.Host,
		CertificateAuthorityData: cp.Config.CAData,
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["harness"] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = "harness"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatalf("rendering token kubeconfig: %v", err)
	}
	dir, err := os.MkdirTemp(t.TempDir(), "token-kubeconfig-")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, token
}
