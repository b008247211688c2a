package ipvs

import "testing"

// TestConnReuseModeIsZeroOnKernelsBefore59: as kube-proxy, the writer
// sets net/ipv4/vs/conn_reuse_mode to 0 on kernels from 4.1 up to but not
// including 5.9, and leaves the kernel's value on 5.9 and later (where
// the stall it worked around is fixed) and on releases it cannot read.
func TestConnReuseModeIsZeroOnKernelsBefore59(t *testing.T) {
	for _, tc := range []struct {
		release string
		want    string
	}{
		{"4.0.9", "1"},
		{"4.1.0", "0"},
		{"4.19.0-27-cloud-amd64", "0"},
		{"5.4.0-150-generic", "0"},
		{"5.8.18", "0"},
		{"5.9.0", "1"},
		{"5.10.0-33-cloud-amd64", "1"},
		{"6.1.0-56-cloud-amd64", "1"},
		{"10.2", "1"},
		{"", "1"},
		{"linux", "1"},
		{"5", "1"},
	} {
		t.Run(tc.release, func(t *testing.T) {
			e := newEnv(t, Config{KernelRelease: tc.release})
			e.sys.Create(ConnReuseModeKey, "1")
			e.mustApply()
			got, err := e.sys.Get(ConnReuseModeKey)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("conn_reuse_mode on %q: %s, want %s", tc.release, got, tc.want)
			}
		})
	}
}

// TestFakeKernelForKnowsTheReleasesSchedulers: the fake knows "twos" on
// a kernel from 6.2, where Linux added it, and not before.
func TestFakeKernelForKnowsTheReleasesSchedulers(t *testing.T) {
	for _, tc := range []struct {
		release string
		twos    bool
	}{{"6.1.0-56-cloud-amd64", false}, {"5.10.0-46-cloud-amd64", false}, {"6.2.0", true}, {"6.12.118+deb13-cloud-amd64\n", true}, {"", false}} {
		t.Run(tc.release, func(t *testing.T) {
			err := NewFakeKernelFor(tc.release).AddVirtualServer(VirtualServer{Key: key("10.96.0.1:80/TCP"), Scheduler: "twos"})
			if got := err == nil; got != tc.twos {
				t.Errorf("twos on %q: %v, want known %v", tc.release, err, tc.twos)
			}
		})
	}
}
