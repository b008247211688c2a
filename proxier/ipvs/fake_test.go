package ipvs

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
)

// TestFakeErrors: the fakes fail as the kernel does (checked against
// Linux 6.1 by integration/ipvswriter's TestKernelErrors).
func TestFakeErrors(t *testing.T) {
	k := key("10.96.0.10:80/TCP")
	d := Destination{Addr: netip.MustParseAddr("10.244.1.5"), Port: 80, Weight: 1}
	p := netip.MustParsePrefix("10.96.0.10/32")
	for _, tc := range []struct {
		name string
		op   func(f *FakeKernel, l *FakeLinks) error
		want error
	}{
		{"add duplicate virtual server", func(f *FakeKernel, _ *FakeLinks) error {
			must(t, f.AddVirtualServer(VirtualServer{Key: k, Scheduler: "rr"}))
			return f.AddVirtualServer(VirtualServer{Key: k, Scheduler: "rr"})
		}, syscall.EEXIST},
		{"unknown scheduler", func(f *FakeKernel, _ *FakeLinks) error {
			return f.AddVirtualServer(VirtualServer{Key: k, Scheduler: "nope"})
		}, syscall.ENOENT},
		{"update missing virtual server", func(f *FakeKernel, _ *FakeLinks) error {
			return f.UpdateVirtualServer(VirtualServer{Key: k, Scheduler: "rr"})
		}, syscall.ESRCH},
		{"delete missing virtual server", func(f *FakeKernel, _ *FakeLinks) error { return f.DeleteVirtualServer(k) }, syscall.ESRCH},
		{"add destination to missing virtual server", func(f *FakeKernel, _ *FakeLinks) error { return f.AddDestination(k, d) }, syscall.ESRCH},
		{"add duplicate destination", func(f *FakeKernel, _ *FakeLinks) error {
			must(t, f.AddVirtualServer(VirtualServer{Key: k, Scheduler: "rr"}))
			must(t, f.AddDestination(k, d))
			return f.AddDestination(k, d)
		}, syscall.EEXIST},
		{"update missing destination", func(f *FakeKernel, _ *FakeLinks) error {
			must(t, f.AddVirtualServer(VirtualServer{Key: k, Scheduler: "rr"}))
			return f.UpdateDestination(k, d)
		}, syscall.ENOENT},
		{"delete missing destination", func(f *FakeKernel, _ *FakeLinks) error {
			must(t, f.AddVirtualServer(VirtualServer{Key: k, Scheduler: "rr"}))
			return f.DeleteDestination(k, d)
		}, syscall.ENOENT},
		{"destinations of missing virtual server", func(f *FakeKernel, _ *FakeLinks) error {
			ds, err := f.Destinations(k)
			if len(ds) != 0 {
				return errors.New("not empty")
			}
			return err
		}, nil},
		{"add duplicate link", func(_ *FakeKernel, l *FakeLinks) error {
			must(t, l.AddDummy("kube-ipvs0"))
			return l.AddDummy("kube-ipvs0")
		}, syscall.EEXIST},
		{"delete missing link", func(_ *FakeKernel, l *FakeLinks) error { return l.DeleteLink("kube-ipvs0") }, syscall.ENODEV},
		{"addresses of missing link", func(_ *FakeKernel, l *FakeLinks) error { _, err := l.Addrs("kube-ipvs0"); return err }, syscall.ENODEV},
		{"add duplicate address", func(_ *FakeKernel, l *FakeLinks) error {
			must(t, l.AddDummy("kube-ipvs0"))
			must(t, l.AddAddr("kube-ipvs0", p))
			return l.AddAddr("kube-ipvs0", p)
		}, syscall.EEXIST},
		{"delete missing address", func(_ *FakeKernel, l *FakeLinks) error {
			must(t, l.AddDummy("kube-ipvs0"))
			return l.DelAddr("kube-ipvs0", p)
		}, syscall.EADDRNOTAVAIL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op(NewFakeKernel(), NewFakeLinks())
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}
