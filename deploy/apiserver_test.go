package deploy

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

// kubectl runs kubectl against the cluster as the admin and returns its
// combined output and exit code (-1 when it could not run).
func kubectl(t *testing.T, kubeconfig string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("kubectl %v: %v", args, err)
	return "", -1
}

// TestAPIServerAcceptsAndAuthorizes applies every kustomization to a real
// kube-apiserver (v1.36.3, from integration/apiserver; skipped when it is
// not built) with strict server-side field validation, then asks the RBAC
// authorizer what the proxy's service account may do.
func TestAPIServerAcceptsAndAuthorizes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl not on PATH")
	}
	// kubeadm runs kube-apiserver with --allow-privileged=true, as kube-proxy
	// needs; the harness does not by default.
	c := apiserver.Start(t, apiserver.Options{ExtraArgs: []string{"--allow-privileged=true"}})
	admin := c.Kubeconfig(apiserver.AdminUser)
	for _, dir := range []string{overlayDir, migrateDir, rollbackDir} {
		if out, code := kubectl(t, admin, "apply", "--validate=strict", "-k", dir); code != 0 {
			t.Fatalf("kubectl apply -k %s: exit %d\n%s", dir, code, out)
		}
	}
	sa := "system:serviceaccount:" + namespace + ":" + name
	tests := []struct {
		verb, resource string // resource[/subresource]
		allowed        bool
	}{
		{"list", "services", true},
		{"watch", "services", true},
		{"get", "nodes", true},
		{"get", "services", false},
		{"list", "nodes", true},
		{"watch", "nodes", true},
		{"list", "endpointslices.discovery.k8s.io", true},
		{"watch", "endpointslices.discovery.k8s.io", true},
		{"create", "events", true},
		{"patch", "events", true},
		{"create", "events.events.k8s.io", false},
		{"patch", "events.events.k8s.io", false},
		{"create", "services", false},
		{"update", "services", false},
		{"patch", "services", false},
		{"delete", "services", false},
		{"update", "services/status", false},
		{"patch", "nodes", false},
		{"patch", "nodes/status", false},
		{"update", "endpointslices.discovery.k8s.io", false},
		{"delete", "endpointslices.discovery.k8s.io", false},
		{"list", "endpoints", false},
		{"update", "events", false},
		{"delete", "events", false},
		{"get", "secrets", false},
		{"list", "configmaps", false},
		{"list", "pods", false},
	}
	for _, tc := range tests {
		t.Run(tc.verb+" "+tc.resource, func(t *testing.T) {
			args := []string{"auth", "can-i", tc.verb, tc.resource, "--all-namespaces", "--as", sa}
			if res, sub, ok := strings.Cut(tc.resource, "/"); ok {
				// "services/status" alone would mean the Service named status.
				args[3] = res
				args = append(args, "--subresource", sub)
			}
			out, code := kubectl(t, admin, args...)
			if code != 0 && code != 1 {
				t.Fatalf("kubectl auth can-i: exit %d\n%s", code, out)
			}
			if got := code == 0; got != tc.allowed {
				t.Errorf("%s may %s %s: %v, want %v (%s)", sa, tc.verb, tc.resource, got, tc.allowed, bytes.TrimSpace([]byte(out)))
			}
		})
	}
}
