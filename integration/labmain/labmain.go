package labmain

import (
	"fmt"
	"os"
	"testing"
)

// Run runs the tests only when KIP_VMLAB=1, which only the VM's /init
// sets; otherwise it says why and exits 0.
func Run(m *testing.M) {
	if os.Getenv("KIP_VMLAB") != "1" {
		fmt.Println("integration: KIP_VMLAB=1 is not set; these tests only run inside the VM lab (hack/vmlab/run.sh). Skipping all.")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
