package hostaddr

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSelect: kube-proxy's exclusions, sorted and deduplicated.
func TestSelect(t *testing.T) {
	a := netip.MustParseAddr
	all := []Addr{
		{"eth0", a("192.168.1.10")},
		{"kube-ipvs0", a("10.96.0.1")},
		{"lo", a("127.0.0.1")},
		{"lo", a("::1")},
		{"eth0", a("fe80::1")},
		{"eth0", a("fd00:1::10")},
		{"eth1", a("10.0.0.5")},
		{"br0", a("192.168.1.10")},
		{"eth2", a("::ffff:10.1.1.1")},
	}
	want := []netip.Addr{a("10.0.0.5"), a("10.1.1.1"), a("192.168.1.10"), a("fd00:1::10")}
	if diff := cmp.Diff(want, Select(all, "kube-ipvs0"), cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
		t.Errorf("Select (-want +got):\n%s", diff)
	}
}
