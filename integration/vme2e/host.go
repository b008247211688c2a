package vme2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

// VMTimeout bounds one VM run (build, boot, test) unless Host.VMTimeout
// says otherwise.
const VMTimeout = 15 * time.Minute

// Host is the host half: a running apiserver the guest can reach, with
// deploy/base's RBAC applied, and the two kubeconfigs for the guest.
type Host struct {
	Cluster                  *apiserver.Cluster
	Repo                     string // the repository root
	ProxyKubeconfig, AdminKC string // host paths, server https://10.0.2.2:<port>
	// VMTimeout, if set, bounds RunVM instead of the VMTimeout constant
	// (hack/vmlab/run.sh's own VMLAB_TIMEOUT is the caller's to raise).
	VMTimeout time.Duration
}

// StartHost starts the apiserver (opts gets the 10.0.2.2 serving SAN),
// applies deploy/base's RBAC, mints the proxy's ServiceAccount token and
// writes the guest kubeconfigs. repo is the repository root.
func StartHost(t *testing.T, repo string, opts apiserver.Options) *Host {
	t.Helper()
	start := time.Now()
	opts.ExtraServingIPs = append(opts.ExtraServingIPs, net.ParseIP(HostFromGuest))
	c := apiserver.Start(t, opts)
	base := filepath.Join(repo, "deploy", "base")
	c.Apply(t, filepath.Join(base, "serviceaccount.yaml"), filepath.Join(base, "clusterrole.yaml"),
		filepath.Join(base, "clusterrolebinding.yaml"))
	token, err := c.ServiceAccountToken("kube-system", "kube-ipvs-proxy")
	if err != nil {
		t.Fatalf("service account token: %v", err)
	}
	t.Logf("apiserver %s ready in %v", c.AdminConfig().Host, time.Since(start).Round(time.Millisecond))
	dir := t.TempDir()
	return &Host{Cluster: c, Repo: repo,
		ProxyKubeconfig: writeGuestKubeconfig(t, filepath.Join(dir, "proxy.kubeconfig"), c.TokenConfig(token)),
		AdminKC:         writeGuestKubeconfig(t, filepath.Join(dir, "admin.kubeconfig"), c.AdminConfig()),
	}
}

// RunVM boots hack/vmlab/run.sh on pkg with user networking and the
// kubeconfigs (named in the guest by EnvProxyKubeconfig and
// EnvAdminKubeconfig), plus extraFiles ("src:dst") and env ("K=v"). It
// streams the console and returns it; a failed run fails the test.
func (h *Host) RunVM(t *testing.T, pkg string, extraFiles, env []string, testArgs ...string) string {
	t.Helper()
	timeout := VMTimeout
	if h.VMTimeout > 0 {
		timeout = h.VMTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	files := append([]string{h.ProxyKubeconfig + ":" + vmProxyKubeconfig, h.AdminKC + ":" + vmAdminKubeconfig}, extraFiles...)
	env = append([]string{EnvProxyKubeconfig + "=" + vmProxyKubeconfig, EnvAdminKubeconfig + "=" + vmAdminKubeconfig}, env...)
	cmd := exec.CommandContext(ctx, filepath.Join(h.Repo, "hack", "vmlab", "run.sh"), append([]string{pkg, "--"}, testArgs...)...)
	cmd.Dir = h.Repo
	cmd.Env = append(os.Environ(), "VMLAB_NET=user",
		"VMLAB_EXTRA_FILES="+strings.Join(files, " "), "VMLAB_ENV="+strings.Join(env, " "))
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(os.Stdout, &out)
	cmd.Stderr = io.MultiWriter(os.Stderr, &out)
	start := time.Now()
	err := cmd.Run()
	t.Logf("VM run took %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("hack/vmlab/run.sh %s: %v", pkg, err)
	}
	return strings.ReplaceAll(out.String(), "\r", "")
}

// writeGuestKubeconfig writes a kubeconfig for cfg's credentials whose
// server is the apiserver as the guest sees it: https://10.0.2.2:<port>.
func writeGuestKubeconfig(t *testing.T, path string, cfg *rest.Config) string {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(cfg.Host, "https://"))
	if err != nil {
		t.Fatalf("apiserver URL %q: %v", cfg.Host, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["vme2e"] = &clientcmdapi.Cluster{Server: "https://" + net.JoinHostPort(HostFromGuest, port),
		CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["vme2e"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken,
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["vme2e"] = &clientcmdapi.Context{Cluster: "vme2e", AuthInfo: "vme2e"}
	kc.CurrentContext = "vme2e"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}
