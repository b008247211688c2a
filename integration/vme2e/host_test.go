//go:build !integration

package vme2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/apiserver"
)

// TestRealModeInVM starts the apiserver on the host and boots the VM lab
// whose test (vm_test.go) runs the proxy in the real mode against it.
func TestRealModeInVM(t *testing.T) {
	if os.Getenv("KIP_VME2E") != "1" {
		t.Skip("boots a VM: set KIP_VME2E=1 (make vm-e2e)")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	h := StartHost(t, repo, apiserver.Options{})
	console := h.RunVM(t, "./integration/vme2e/", nil, nil, "-test.v")
	if !strings.Contains(console, "--- PASS: TestProxyInVM") {
		t.Fatalf("the VM run passed but did not run TestProxyInVM (skipped?)")
	}
}
