package ipvs

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
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

// missingOnce is a kernel whose first dump of the virtual servers misses
// every other one, as a dump does when IPVS changes meanwhile.
type missingOnce struct {
	*FakeKernel
	dumps int
}

func (m *missingOnce) VirtualServers() ([]VirtualServer, error) {
	vss, err := m.FakeKernel.VirtualServers()
	if m.dumps++; m.dumps == 1 {
		var half []VirtualServer
		for i, vs := range vss {
			if i%2 == 0 {
				half = append(half, vs)
			}
		}
		return half, err
	}
	return vss, err
}

// TestCleanupReadsAgainUntilNoneOfOursIsLeft: a dump that missed some of
// our virtual servers does not leave them behind: Clean reads the kernel
// again and deletes those, until a read finds none of ours.
func TestCleanupReadsAgainUntilNoneOfOursIsLeft(t *testing.T) {
	k, l, sys := NewFakeKernel(), NewFakeLinks(), NewFakeSysctls()
	if err := New(Config{Now: time.Now}, k, l, sys).Resync(scalePlan(10)); err != nil {
		t.Fatal(err)
	}
	m := &missingOnce{FakeKernel: k}
	r, err := New(Config{Now: time.Now}, m, l, sys).Clean(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.VirtualServers) != 10 || !slices.IsSortedFunc(r.VirtualServers, Key.Compare) {
		t.Errorf("Removed %v, want the 10 virtual servers, sorted", r.VirtualServers)
	}
	if left := k.Dump(); left != "" {
		t.Errorf("left in the kernel:\n%s", left)
	}
	if m.dumps != 3 {
		t.Errorf("%d dumps, want 3: one missing half, one finding the rest, one finding none", m.dumps)
	}
}
