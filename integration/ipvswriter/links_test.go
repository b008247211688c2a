//go:build integration

package ipvswriter

import (
	"errors"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
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

// churnPause is the pause between two address changes of the churn
// beside the dumps (a host's own addresses change far less often).
const churnPause = 20 * time.Millisecond

// TestLinksAddrsRedoesInterruptedDumps: the kernel dumps every address of
// the namespace for Addrs, and marks the dump interrupted (NLM_F_DUMP_INTR)
// when an address changes while it spans several messages. Addrs redoes
// such a dump instead of failing the sync that asked.
func TestLinksAddrsRedoesInterruptedDumps(t *testing.T) {
	clean(t)
	s := linuxSeams(t)
	if err := s.l.AddDummy(dummy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.l.DeleteLink(dummy) })
	const n = 2000 // enough for a dump of several messages
	for i := range n {
		if err := s.l.AddAddr(dummy, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 96, byte(i / 250), byte(i%250 + 1)}), 32)); err != nil {
			t.Fatal(err)
		}
	}
	other := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "churn0"}}
	if err := netlink.LinkAdd(other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(other) })
	stop := labnet.ChurnAddress(other, netip.MustParsePrefix("192.0.2.1/32"), churnPause)
	failed, raw := 0, 0
	for range 100 {
		if labnet.InterruptedDump() { // not redone: proof that the churn interrupts some
			raw++
		}
		got, err := s.l.Addrs(dummy)
		if err != nil {
			failed++
			t.Logf("Addrs: %v", err)
			continue
		}
		if len(got) != n {
			t.Errorf("Addrs: %d addresses, want %d", len(got), n)
		}
	}
	t.Logf("100 Addrs beside %d address changes elsewhere: %d failed; %d of 100 single dumps were interrupted", stop(), failed, raw)
	if raw == 0 {
		t.Fatal("no dump was interrupted: the churn proves nothing")
	}
	if failed > 0 {
		t.Errorf("%d of 100 Addrs failed beside address churn, want 0", failed)
	}
}
