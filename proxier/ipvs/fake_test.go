package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// TestFakeErrors: the fakes fail as the kernel does (checked against
// Linux 6.1 by integration/ipvswriter's TestKernelErrors and
// TestKernelContract).
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
		{"twos scheduler is unknown (Linux 6.2)", func(f *FakeKernel, _ *FakeLinks) error {
			return f.AddVirtualServer(VirtualServer{Key: k, Scheduler: "twos"})
		}, syscall.ENOENT},
		{"none scheduler is accepted", func(f *FakeKernel, _ *FakeLinks) error {
			return f.AddVirtualServer(VirtualServer{Key: k, Scheduler: "none"})
		}, nil},
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
		{"link name over 15 bytes", func(_ *FakeKernel, l *FakeLinks) error { return l.AddDummy("kube-ipvs0-long0") }, syscall.ERANGE},
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

// TestFakeAnswers: what the fakes return, as the Linux adapters return it.
func TestFakeAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  func(f *FakeKernel, s *FakeSysctls) (string, error)
		want string
	}{
		{"timeouts are whole seconds, and under a second leaves one unchanged", func(f *FakeKernel, _ *FakeSysctls) (string, error) {
			if err := f.SetTimeouts(Timeouts{TCP: 1500 * time.Millisecond, UDP: 500 * time.Millisecond}); err != nil {
				return "", err
			}
			to, err := f.Timeouts()
			return fmt.Sprintf("%s %s %s", to.TCP, to.TCPFin, to.UDP), err
		}, "1s 2m0s 5m0s"},
		{"a sysctl reads trimmed", func(_ *FakeKernel, s *FakeSysctls) (string, error) {
			return s.Get("net/ipv4/ip_forward")
		}, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.got(NewFakeKernel(), NewFakeSysctls())
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
