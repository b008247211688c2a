package ipvs

import (
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs/ipvsnl"
)

// TestNewLinuxWithoutIPVSNamesTheModule holds the start on a kernel
// without IPVS (the host's, where ip_vs cannot be loaded) to an error
// that names the module: moby/ipvs only logs that it could not resolve
// the family, and its handle then panics on the first request.
func TestNewLinuxWithoutIPVSNamesTheModule(t *testing.T) {
	if c, err := ipvsnl.Open(); err == nil {
		c.Close()
		t.Skip("this kernel has IPVS")
	}
	w, err := NewLinux(Config{})
	if err == nil {
		t.Fatalf("NewLinux on a kernel without IPVS returned a Writer (%T), want an error", w)
	}
	if !strings.Contains(err.Error(), "load module ip_vs") {
		t.Errorf("NewLinux's error %q does not name module ip_vs", err)
	}
	t.Log(err)
}
