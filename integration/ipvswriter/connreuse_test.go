//go:build integration

package ipvswriter

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestConnReuseModeFollowsTheKernelRelease: as kube-proxy, the writer sets
// net/ipv4/vs/conn_reuse_mode to 0 on a kernel from 4.1 up to 5.9 and
// leaves it on a later one. The lab's own kernel decides the first case;
// the second tells the writer it runs on 5.4, to see the real sysctl
// take the write.
func TestConnReuseModeFollowsTheKernelRelease(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	release := strings.TrimSpace(string(b))
	before59 := func(r string) bool {
		var major, minor int
		_, err := fmtSscan(r, &major, &minor)
		return err == nil && (major < 5 || major == 5 && minor < 9)
	}
	for _, tc := range []struct {
		name, release string
	}{
		{"this kernel", ""},
		{"a kernel before 5.9", "5.4.0-150-generic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clean(t)
			labnet.SetSysctl(t, nil, ipvs.ConnReuseModeKey, "1") // the kernel's default; restored when the test ends
			w := newWriter(t, ipvs.Config{KernelRelease: tc.release})
			if err := w.Resync(policy.Plan{}); err != nil {
				t.Fatal(err)
			}
			r := tc.release
			if r == "" {
				r = release
			}
			want := "1"
			if before59(r) {
				want = "0"
			}
			got, err := os.ReadFile("/proc/sys/" + ipvs.ConnReuseModeKey)
			if err != nil {
				t.Fatal(err)
			}
			if g := strings.TrimSpace(string(got)); g != want {
				t.Errorf("conn_reuse_mode on %s: %s, want %s", r, g, want)
			} else {
				t.Logf("conn_reuse_mode on %s (this kernel %s): %s", r, release, g)
			}
		})
	}
}

// fmtSscan reads "major.minor" from the front of a kernel release.
func fmtSscan(r string, major, minor *int) (int, error) {
	r, _, _ = strings.Cut(r, "-")
	return fmt.Sscanf(r, "%d.%d", major, minor)
}
