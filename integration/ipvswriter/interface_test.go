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
