//go:build integration

package ipvswriter

import (
	"errors"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestInterfaceMustBeDummy: with Config.Interface naming a link that is
// not a dummy interface (lo; a bridge with the node's address), every
// sync and Cleanup fail with ErrNotDummy, and the link keeps its
// addresses and is never deleted.
func TestInterfaceMustBeDummy(t *testing.T) {
	h := clean(t)
	labnet.LinkUp(t, "lo")
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-node"}}
	if err := netlink.LinkAdd(br); err != nil {
		t.Fatalf("add bridge: %v", err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(br) })
	addr, _ := netlink.ParseAddr("198.51.100.20/24")
	if err := netlink.AddrAdd(br, addr); err != nil {
		t.Fatalf("bridge address: %v", err)
	}
	addrsOf := func(name string) []string {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range as {
			out = append(out, a.IPNet.String())
		}
		slices.Sort(out)
		return out
	}
	for _, name := range []string{"lo", "br-node"} {
		t.Run(name, func(t *testing.T) {
			before := addrsOf(name)
			w := newWriter(t, ipvs.Config{Interface: name})
			for what, err := range map[string]error{
				"Apply":   w.Apply(cluster()),
				"Resync":  w.Resync(plan(cluster()...)),
				"Cleanup": w.Cleanup(),
			} {
				if !errors.Is(err, ipvs.ErrNotDummy) {
					t.Errorf("%s: %v, want ErrNotDummy", what, err)
				}
			}
			if got := addrsOf(name); !slices.Equal(got, before) {
				t.Errorf("%s's addresses %v, were %v", name, got, before)
			}
			if got := dumpIPVS(t, h); got != "" {
				t.Errorf("IPVS programmed through a refused interface:\n%s", got)
			}
		})
	}
}

// TestInterfaceMustBeOurs: a dummy interface another agent created
// (NodeLocal DNSCache's nodelocaldns, with its address) is refused as
// Config.Interface by every sync and by Cleanup, and keeps its address;
// one the Writer creates carries the alias ipvs.LinkAlias in the kernel,
// so that a fresh process's Cleanup knows it as ours and deletes it.
func TestInterfaceMustBeOurs(t *testing.T) {
	clean(t)
	t.Run("another agent's dummy interface", func(t *testing.T) {
		dl := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "nodelocaldns"}}
		if err := netlink.LinkAdd(dl); err != nil {
			t.Fatalf("add nodelocaldns: %v", err)
		}
		t.Cleanup(func() { _ = netlink.LinkDel(dl) })
		addr, _ := netlink.ParseAddr("169.254.20.10/32")
		if err := netlink.AddrAdd(dl, addr); err != nil {
			t.Fatal(err)
		}
		w := newWriter(t, ipvs.Config{Interface: "nodelocaldns"})
		for what, err := range map[string]error{
			"Apply":   w.Apply(cluster()),
			"Resync":  w.Resync(plan(cluster()...)),
			"Cleanup": w.Cleanup(),
		} {
			if !errors.Is(err, ipvs.ErrForeignLink) {
				t.Errorf("%s: %v, want ErrForeignLink", what, err)
			}
		}
		l, err := netlink.LinkByName("nodelocaldns")
		if err != nil {
			t.Fatalf("nodelocaldns after Cleanup: %v", err)
		}
		as, _ := netlink.AddrList(l, netlink.FAMILY_V4)
		if len(as) != 1 || as[0].IPNet.String() != "169.254.20.10/32" {
			t.Errorf("nodelocaldns's addresses %v, want 169.254.20.10/32", as)
		}
	})
	t.Run("a dummy interface the Writer created under another name", func(t *testing.T) {
		w := newWriter(t, ipvs.Config{Interface: "kipvs1"})
		if err := w.Resync(plan(cluster()...)); err != nil {
			t.Fatalf("Resync: %v", err)
		}
		l, err := netlink.LinkByName("kipvs1")
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Attrs().Alias; got != ipvs.LinkAlias {
			t.Errorf("kipvs1's alias %q, want %q", got, ipvs.LinkAlias)
		}
		if err := newWriter(t, ipvs.Config{Interface: "kipvs1"}).Cleanup(); err != nil {
			t.Errorf("Cleanup in a fresh Writer: %v", err)
		}
		if _, err := netlink.LinkByName("kipvs1"); err == nil {
			t.Error("kipvs1 left after Cleanup")
		}
	})
}
