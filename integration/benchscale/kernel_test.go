//go:build integration

package benchscale

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// pollEvery is how often a wait reads the kernel: fine enough for
// latencies of tens of milliseconds under TCG, coarse enough to leave
// the vCPUs to the proxy.
const pollEvery = 5 * time.Millisecond

// kernel reads IPVS as the proxy left it. Not safe for concurrent use.
type kernel struct{ h *ipvs.Handle }

func newKernel(t *testing.T) *kernel {
	t.Helper()
	h, err := ipvs.New("")
	if err != nil {
		t.Fatalf("ipvs handle: %v", err)
	}
	t.Cleanup(h.Close)
	return &kernel{h: h}
}

// virtualServer is the TCP or UDP virtual server addr:port.
func virtualServer(addr netip.Addr, port uint16, proto uint16) *ipvs.Service {
	return &ipvs.Service{Address: net.IP(addr.AsSlice()), Port: port, Protocol: proto, AddressFamily: unix.AF_INET}
}

// destinations returns the virtual server's destination addresses; ok
// is false when it does not exist.
func (k *kernel) destinations(vs *ipvs.Service) (addrs []netip.Addr, ok bool) {
	if _, err := k.h.GetService(vs); err != nil {
		return nil, false
	}
	return k.listed(vs), true
}

// listed returns the destination addresses the kernel lists for the
// virtual server, in one request: none when it does not exist (or the
// read failed), so a watcher that waits for an address to appear needs
// no GetService first.
func (k *kernel) listed(vs *ipvs.Service) (addrs []netip.Addr) {
	ds, err := k.h.GetDestinations(vs)
	if err != nil {
		return nil
	}
	for _, d := range ds {
		if a, ok := netip.AddrFromSlice(d.Address); ok {
			addrs = append(addrs, a.Unmap())
		}
	}
	return addrs
}

// waitFor polls the virtual server until cond holds for its
// destinations (ok: it exists); it returns when cond first held, or
// fails after limit.
func (k *kernel) waitFor(t *testing.T, vs *ipvs.Service, limit time.Duration, what string,
	cond func(addrs []netip.Addr, ok bool) bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		addrs, ok := k.destinations(vs)
		now := time.Now()
		if cond(addrs, ok) {
			return now
		}
		if now.After(deadline) {
			t.Fatalf("%s:%d: %s not seen within %v (exists %v, destinations %v)", vs.Address, vs.Port, what, limit, ok, addrs)
		}
		time.Sleep(pollEvery)
	}
}

// count reads the whole of IPVS and the addresses bound on kube-ipvs0.
func (k *kernel) count() (Expected, error) {
	var got Expected
	svcs, err := k.h.GetServices()
	if err != nil {
		return got, fmt.Errorf("ipvs services: %w", err)
	}
	got.VirtualServers = len(svcs)
	for _, s := range svcs {
		ds, err := k.h.GetDestinations(s)
		if err != nil {
			return got, fmt.Errorf("ipvs destinations of %s:%d: %w", s.Address, s.Port, err)
		}
		got.Destinations += len(ds)
	}
	if link, err := netlink.LinkByName("kube-ipvs0"); err == nil {
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			return got, fmt.Errorf("kube-ipvs0 addresses: %w", err)
		}
		got.BoundAddresses = len(addrs)
	}
	return got, nil
}

// waitCount waits until the kernel holds want, for at most limit.
func (k *kernel) waitCount(t *testing.T, want Expected, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got, err := k.count()
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel holds %+v (err %v), want %+v", got, err, want)
		}
		time.Sleep(time.Second)
	}
}

// readCost times what the proxy's idle check reads of the table, once,
// as the proxy reads it: all of /proc/net/ip_vs in reads of 64 KiB (the
// kernel hands it out a page at a time, and finds each read's first
// virtual server by walking the table from its start), and, beside it,
// one generic netlink dump of the virtual servers.
func (k *kernel) readCost(t *testing.T) {
	t.Helper()
	f, err := os.Open("/proc/net/ip_vs")
	if err != nil {
		t.Logf("read cost: %v", err)
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	reads, bytes := 0, 0
	t0 := time.Now()
	for {
		n, err := f.Read(buf)
		reads++
		bytes += n
		if err != nil {
			break
		}
	}
	procTook := time.Since(t0)
	t0 = time.Now()
	svcs, err := k.h.GetServices()
	t.Logf("read cost: /proc/net/ip_vs, %d bytes in %d reads, took %v; a dump of the %d virtual servers (err %v) took %v",
		bytes, reads, procTook.Round(time.Millisecond), len(svcs), err, time.Since(t0).Round(time.Millisecond))
}
