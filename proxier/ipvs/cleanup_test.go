package ipvs

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestCleanupFailureInTheMiddle: Cleanup deletes our virtual servers in
// one Write; one the kernel refuses is reported and left out of Removed,
// and the deletions before and after it stand.
func TestCleanupFailureInTheMiddle(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   error
		wantErr string
		want    string // Removed.VirtualServers
	}{
		{"no failure: all deleted", nil, "", "10.96.0.1:80/TCP 10.96.0.2:80/TCP 10.96.0.3:80/TCP"},
		{"the middle deletion refused", syscall.EBUSY, "delete virtual server 10.96.0.2:80/TCP: device or resource busy",
			"10.96.0.1:80/TCP 10.96.0.3:80/TCP"},
		{"the middle one already gone (ESRCH) counts as deleted", syscall.ESRCH, "",
			"10.96.0.1:80/TCP 10.96.0.2:80/TCP 10.96.0.3:80/TCP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustApply(three()...)
			e.fault("delete-service", "10.96.0.2:80/TCP", tc.fault)
			n := e.k.Writes()
			r, err := e.w.Clean(false)
			if (err == nil) != (tc.wantErr == "") || (err != nil && (err.Error() != tc.wantErr || !errors.Is(err, tc.fault))) {
				t.Fatalf("Clean error %v, want %q", err, tc.wantErr)
			}
			var got []string
			for _, k := range r.VirtualServers {
				got = append(got, k.String())
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("Removed %q, want %q", g, tc.want)
			}
			if w := e.k.Writes() - n; w != 1 {
				t.Errorf("%d writes, want 1", w)
			}
			wantLeft := ""
			if tc.fault != nil { // the fault stands in for the kernel: nothing deleted
				wantLeft = "TCP 10.96.0.2:80"
			}
			if left := strings.Join(strings.Fields(e.k.Dump()), " "); !strings.HasPrefix(left, wantLeft) || (wantLeft == "" && left != "") {
				t.Errorf("left in the kernel: %q, want %q and its destinations", left, wantLeft)
			}
		})
	}
}
