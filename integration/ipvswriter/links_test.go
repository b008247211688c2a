//go:build integration

package ipvswriter

import (
	"errors"
	"net/netip"
	"slices"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestLinksFollowARecreatedInterface: the Linux Links adapter keeps the
// dummy interface it last looked up, so that an address per service VIP
// does not cost a lookup each. When the interface is deleted behind its
// back, the next call answers ENODEV; when it is also made again, the
// next call reaches the new one, not the old index.
func TestLinksFollowARecreatedInterface(t *testing.T) {
	clean(t)
	s := linuxSeams(t)
	a := netip.MustParsePrefix("10.96.0.10/32")
	b := netip.MustParsePrefix("10.96.0.11/32")
	if err := s.l.AddDummy(dummy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.l.DeleteLink(dummy) })
	if err := s.l.AddAddr(dummy, a); err != nil {
		t.Fatalf("first address: %v", err)
	}
	deleteBehindItsBack := func() {
		t.Helper()
		l, err := netlink.LinkByName(dummy)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkDel(l); err != nil {
			t.Fatal(err)
		}
	}

	deleteBehindItsBack()
	if err := s.l.AddAddr(dummy, b); !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("AddAddr on a deleted interface: %v, want ENODEV", err)
	}
	if err := s.l.DelAddr(dummy, a); !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("DelAddr on a deleted interface: %v, want ENODEV", err)
	}

	// Made again by hand, with a new index, after the adapter cached the old one.
	if err := s.l.AddDummy(dummy); err != nil {
		t.Fatal(err)
	}
	if err := s.l.AddAddr(dummy, a); err != nil {
		t.Fatal(err)
	}
	deleteBehindItsBack()
	if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: dummy}}); err != nil {
		t.Fatal(err)
	}
	if err := s.l.AddAddr(dummy, b); err != nil {
		t.Fatalf("AddAddr on the recreated interface: %v", err)
	}
	got, err := s.l.Addrs(dummy)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []netip.Prefix{b}) {
		t.Fatalf("addresses of the recreated interface: %v, want [%v]", got, b)
	}
	if err := s.l.DelAddr(dummy, b); err != nil {
		t.Fatalf("DelAddr on the recreated interface: %v", err)
	}
}
