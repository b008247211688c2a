//go:build integration

package integration

import (
	"fmt"
	"os"
	"testing"
)

// TestMain refuses to run anything outside the VM lab: these tests
// reconfigure the kernel's network stack of whatever machine runs them.
func TestMain(m *testing.M) {
	if os.Getenv("KIP_VMLAB") != "1" {
		fmt.Println("integration: KIP_VMLAB=1 is not set; these tests only run inside the VM lab (hack/vmlab/run.sh). Skipping all.")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
