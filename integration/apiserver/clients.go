package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Client-side rate limits: high, so tests are never throttled by client-go.
const (
	clientQPS   = 200
	clientBurst = 400
)

// TokenTTL is the lifetime ServiceAccountToken asks for: longer than
// the longest run against one apiserver. The VM lab's bench runs at
// 50,000 services keep one apiserver for well over an hour, and a proxy
// started on an expired token cannot list what it serves.
const TokenTTL = 24 * time.Hour

// AdminConfig is a client config for the admin (client cert, group
// system:masters: every request is allowed).
func (c *Cluster) AdminConfig() *rest.Config {
	return c.restConfig(rest.TLSClientConfig{CertData: c.admin.cert, KeyData: c.admin.key}, "")
}

// ClientConfig is a client config authenticating with a fresh client cert
// for user in groups (CN=user, O=groups); RBAC and the Node authorizer
// decide what it may do. ClientConfig(AdminUser) is AdminConfig.
func (c *Cluster) ClientConfig(user string, groups ...string) (*rest.Config, error) {
	if user == AdminUser && len(groups) == 0 {
		return c.AdminConfig(), nil
	}
	pair, err := c.pki.clientCert(user, groups)
	if err != nil {
		return nil, err
	}
	return c.restConfig(rest.TLSClientConfig{CertData: pair.cert, KeyData: pair.key}, ""), nil
}

// TokenConfig is a client config authenticating with a bearer token.
func (c *Cluster) TokenConfig(token string) *rest.Config {
	return c.restConfig(rest.TLSClientConfig{}, token)
}

func (c *Cluster) restConfig(tls rest.TLSClientConfig, token string) *rest.Config {
	tls.CAData = c.pki.caPEM
	return &rest.Config{
		Host:            c.url,
		TLSClientConfig: tls,
		BearerToken:     token,
		QPS:             clientQPS,
		Burst:           clientBurst,
		UserAgent:       "kube-ipvs-proxy-integration",
	}
}

// Kubeconfig writes a self-contained kubeconfig (CA, cert and key
// embedded) for user in groups and returns its path. user AdminUser with
// no groups is the system:masters admin; other users get a fresh client
// cert, e.g. Kubeconfig("system:node:node-a", "system:nodes") for a
// kubelet identity. It fails the test on error.
func (c *Cluster) Kubeconfig(user string, groups ...string) string {
	c.t.Helper()
	cfg, err := c.ClientConfig(user, groups...)
	if err != nil {
		c.t.Fatalf("apiserver: kubeconfig for %q: %v", user, err)
	}
	return c.writeKubeconfig("user-"+user, cfg)
}

// KubeconfigForToken writes a kubeconfig that authenticates with token
// and returns its path. It fails the test on error.
func (c *Cluster) KubeconfigForToken(token string) string {
	c.t.Helper()
	sum := sha256.Sum256([]byte(token))
	return c.writeKubeconfig("token-"+hex.EncodeToString(sum[:6]), c.TokenConfig(token))
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func (c *Cluster) writeKubeconfig(name string, cfg *rest.Config) string {
	c.t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	kc.CurrentContext = "test"
	dir := filepath.Join(c.dir, "kubeconfigs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		c.t.Fatalf("apiserver: %v", err)
	}
	path := filepath.Join(dir, unsafeFileChars.ReplaceAllString(name, "_")+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		c.t.Fatalf("apiserver: write kubeconfig: %v", err)
	}
	return path
}

// ServiceAccountToken creates namespace ns and service account name if
// they are missing and returns a token for it from the TokenRequest API
// (audience: the apiserver's, lifetime TokenTTL). The service account's
// user name is system:serviceaccount:<ns>:<name>.
func (c *Cluster) ServiceAccountToken(ns, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(c.AdminConfig())
	if err != nil {
		return "", fmt.Errorf("admin clientset: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create namespace %s: %w", ns, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create service account %s/%s: %w", ns, name, err)
	}
	ttl := int64(TokenTTL / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}
	tr, err = cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}
