// Package labmain is the TestMain of every VM lab test package: it refuses
// to run tests outside the VM lab, because they reconfigure the network
// stack of whatever machine runs them. Each package under integration/
// has
//
//	func TestMain(m *testing.M) { labmain.Run(m) }
//
// in a file with the integration build tag.
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
