//go:build integration

package nftwriter

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	vnl "github.com/vishvananda/netlink"
)

// bigReadBuffer lets a monitor socket hold a whole transaction's events.
func bigReadBuffer(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	}); err != nil {
		return err
	}
	return serr
}

// addDummy creates a dummy link holding addrs (/32 or /128), up.
func addDummy(t *testing.T, name string, addrs ...string) {
	t.Helper()
	d := &vnl.Dummy{LinkAttrs: vnl.LinkAttrs{Name: name}}
	if err := vnl.LinkAdd(d); err != nil {
		t.Fatalf("add dummy %s: %v", name, err)
	}
	t.Cleanup(func() { _ = vnl.LinkDel(d) })
	for _, s := range addrs {
		ip := net.ParseIP(s)
		bits := 128
		if ip.To4() != nil {
			bits = 32
		}
		if err := vnl.AddrAdd(d, &vnl.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}}); err != nil {
			t.Fatalf("add %s to %s: %v", s, name, err)
		}
	}
	if err := vnl.LinkSetUp(d); err != nil {
		t.Fatalf("set %s up: %v", name, err)
	}
}

func linkUp(t *testing.T, name string) {
	t.Helper()
	l, err := vnl.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	if err := vnl.LinkSetUp(l); err != nil {
		t.Fatalf("set %s up: %v", name, err)
	}
}

func writeSysctl(t *testing.T, key, value string) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
		t.Fatalf("sysctl %s=%s: %v", key, value, err)
	}
}

// listen serves TCP on addr until the test ends, accepting and closing.
func listen(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// pod is a network namespace wired to the root one by a veth pair: root
// side 10.244.<idx>.1/24, pod eth0 10.244.<idx>.2/24, default route.
type pod struct {
	ns netns.NsHandle
	ip net.IP
}

func setupPod(t *testing.T, idx int) *pod {
	t.Helper()
	ns, err := newNetns()
	if err != nil {
		t.Fatalf("new netns: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	p := &pod{ns: ns, ip: net.IPv4(10, 244, byte(idx), 2).To4()}
	hostIP := &net.IPNet{IP: net.IPv4(10, 244, byte(idx), 1), Mask: net.CIDRMask(24, 32)}
	veth := &vnl.Veth{LinkAttrs: vnl.LinkAttrs{Name: fmt.Sprintf("veth-pod%d", idx)}, PeerName: "eth0", PeerNamespace: vnl.NsFd(int(ns))}
	if err := vnl.LinkAdd(veth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	t.Cleanup(func() { _ = vnl.LinkDel(veth) })
	if err := vnl.AddrAdd(veth, &vnl.Addr{IPNet: hostIP}); err != nil {
		t.Fatalf("host veth address: %v", err)
	}
	if err := vnl.LinkSetUp(veth); err != nil {
		t.Fatalf("host veth up: %v", err)
	}
	nh, err := vnl.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink handle in pod: %v", err)
	}
	defer nh.Close()
	for _, name := range []string{"lo", "eth0"} {
		link, err := nh.LinkByName(name)
		if err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
		if name == "eth0" {
			if err := nh.AddrAdd(link, &vnl.Addr{IPNet: &net.IPNet{IP: p.ip, Mask: net.CIDRMask(24, 32)}}); err != nil {
				t.Fatalf("pod address: %v", err)
			}
		}
		if err := nh.LinkSetUp(link); err != nil {
			t.Fatalf("pod %s up: %v", name, err)
		}
	}
	if err := nh.RouteAdd(&vnl.Route{Gw: hostIP.IP}); err != nil {
		t.Fatalf("pod default route: %v", err)
	}
	return p
}

// dial connects from the pod's namespace (nil: the root namespace) and
// reports how long it took.
func (p *pod) dial(addr string, timeout time.Duration) (time.Duration, error) {
	do := func() (time.Duration, error) {
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, timeout)
		d := time.Since(start)
		if err == nil {
			c.Close()
		}
		return d, err
	}
	if p == nil {
		return do()
	}
	var d time.Duration
	err := inNetns(p.ns, func() error {
		var err error
		d, err = do()
		return err
	})
	return d, err
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// inNetns runs fn on a fresh OS thread switched into ns; the thread stays
// locked and is discarded afterwards.
func inNetns(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// newNetns creates an unnamed network namespace without moving any
// long-lived thread into it.
func newNetns() (netns.NsHandle, error) {
	type result struct {
		ns  netns.NsHandle
		err error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends up in the new netns
		ns, err := netns.New()
		rc <- result{ns, err}
	}()
	r := <-rc
	return r.ns, r.err
}
