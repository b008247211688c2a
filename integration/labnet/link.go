//go:build integration

package labnet

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AddVeth creates a veth pair through nl: name (cut to the kernel's
// limit) in nl's namespace, set up and, when master > 0, enslaved to that
// bridge; and eth0 in peer's namespace, left down. peer must not be the
// root Host. It returns the near side; deleting either side deletes both.
func AddVeth(nl *netlink.Handle, name string, master int, peer *Host) (netlink.Link, error) {
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{Name: LinkName(name), MasterIndex: master},
		PeerName:  "eth0", PeerNamespace: netlink.NsFd(int(peer.ns)),
	}
	if err := nl.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("add veth %s to %s: %w", veth.Name, peer, err)
	}
	link, err := nl.LinkByName(veth.Name)
	if err != nil {
		return nil, fmt.Errorf("veth %s: %w", veth.Name, err)
	}
	if err := nl.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("set %s up: %w", veth.Name, err)
	}
	return link, nil
}

// UpLinks sets the named links up and returns the last one.
func UpLinks(nl *netlink.Handle, names ...string) (netlink.Link, error) {
	var link netlink.Link
	for _, name := range names {
		var err error
		if link, err = nl.LinkByName(name); err != nil {
			return nil, fmt.Errorf("link %s: %w", name, err)
		}
		if err := nl.LinkSetUp(link); err != nil {
			return nil, fmt.Errorf("set %s up: %w", name, err)
		}
	}
	return link, nil
}

// AddAddrs adds addresses to a link; IPv6 ones skip duplicate address
// detection so they are usable at once.
func AddAddrs(nl *netlink.Handle, link netlink.Link, ps ...netip.Prefix) error {
	for _, p := range ps {
		a := &netlink.Addr{IPNet: IPNet(p)}
		if !p.Addr().Is4() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := nl.AddrAdd(link, a); err != nil {
			return fmt.Errorf("add %s to %s: %w", p, link.Attrs().Name, err)
		}
	}
	return nil
}

// IPNet converts a prefix, keeping its address bits (10.244.1.2/24 stays
// 10.244.1.2/24, as netlink wants for an interface address).
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// LinkName cuts a link name to the kernel's 15-byte limit.
func LinkName(s string) string {
	if len(s) > unix.IFNAMSIZ-1 {
		return s[:unix.IFNAMSIZ-1]
	}
	return s
}

// Dummy creates a dummy link in the caller's namespace holding addrs,
// each a prefix ("198.51.100.10/24") or a bare address (made /32 or
// /128), sets it up, and deletes it when the test ends.
func Dummy(t testing.TB, name string, addrs ...string) netlink.Link {
	t.Helper()
	nl, err := (*Host)(nil).Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	d := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := nl.LinkAdd(d); err != nil {
		t.Fatalf("add dummy %s: %v", name, err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(d) })
	for _, s := range addrs {
		p, err := parsePrefix(s)
		if err != nil {
			t.Fatalf("dummy %s: %v", name, err)
		}
		if err := AddAddrs(nl, d, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := nl.LinkSetUp(d); err != nil {
		t.Fatalf("set %s up: %v", name, err)
	}
	return d
}

// parsePrefix reads "addr/bits", or a bare address as a host prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// LinkUp sets a link of the caller's namespace up (lo, say: the VM boots
// with it down) and, if it was down, down again when the test ends.
func LinkUp(t testing.TB, name string) {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	if l.Attrs().Flags&net.FlagUp != 0 {
		return
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatalf("set %s up: %v", name, err)
	}
	t.Cleanup(func() { _ = netlink.LinkSetDown(l) })
}
