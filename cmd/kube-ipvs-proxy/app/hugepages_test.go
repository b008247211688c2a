package app

import (
	"os"
	"strings"
	"testing"
)

// TestHugePagesOffForTheProcess: after hugePagesOff the kernel reports
// THP disabled for this process (the real kernel's /proc/self/status).
func TestHugePagesOffForTheProcess(t *testing.T) {
	if err := hugePagesOff(); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if name, v, ok := strings.Cut(l, ":"); ok && name == "THP_enabled" {
			if v = strings.TrimSpace(v); v != "0" {
				t.Errorf("THP_enabled: %s, want 0", v)
			}
			return
		}
	}
	t.Skip("this kernel's /proc/self/status has no THP_enabled (before Linux 5.0)")
}
