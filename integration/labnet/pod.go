//go:build integration

package labnet

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// Pod is a namespace wired to the root namespace by a veth pair, the
// simplest lab pod: root side veth-<name> with 10.244.<idx>.1/24, pod
// side eth0 with IP 10.244.<idx>.2/24 and a default route via the root
// side. (The traffic package builds its multi-node pods from the same
// pieces: Host, AddVeth, AddAddrs.)
type Pod struct {
	*Host
	IP netip.Addr
}

// NewPod creates the pod, with lo and eth0 up; the namespace and the veth
// go when the test ends.
func NewPod(t testing.TB, name string, idx int) *Pod {
	t.Helper()
	h, err := NewHost(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	p := &Pod{Host: h, IP: netip.AddrFrom4([4]byte{10, 244, byte(idx), 2})}
	gw := netip.AddrFrom4([4]byte{10, 244, byte(idx), 1})
	if err := wirePod(t, p, gw); err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	return p
}

func wirePod(t testing.TB, p *Pod, gw netip.Addr) error {
	root, err := (*Host)(nil).Netlink()
	if err != nil {
		return err
	}
	defer root.Close()
	veth, err := AddVeth(root, "veth-"+p.Name, 0, p.Host)
	if err != nil {
		return err
	}
	t.Cleanup(func() { _ = netlink.LinkDel(veth) })
	if err := AddAddrs(root, veth, netip.PrefixFrom(gw, 24)); err != nil {
		return err
	}
	nl, err := p.Netlink()
	if err != nil {
		return err
	}
	defer nl.Close()
	eth0, err := UpLinks(nl, "lo", "eth0")
	if err != nil {
		return err
	}
	if err := AddAddrs(nl, eth0, netip.PrefixFrom(p.IP, 24)); err != nil {
		return err
	}
	if err := nl.RouteAdd(&netlink.Route{Gw: net.IP(gw.AsSlice())}); err != nil {
		return fmt.Errorf("default route via %s: %w", gw, err)
	}
	return nil
}

// Connect opens a TCP connection to addr from the pod's namespace, closes
// it, and reports how long the attempt took. A nil *Pod connects from the
// caller's namespace, so that tests can list the node itself, as nil,
// next to its pods.
func (p *Pod) Connect(addr string, timeout time.Duration) (time.Duration, error) {
	var from *Host
	if p != nil {
		from = p.Host
	}
	var d time.Duration
	err := from.Do(func() error {
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, timeout)
		d = time.Since(start)
		if err == nil {
			c.Close()
		}
		return err
	})
	return d, err
}
