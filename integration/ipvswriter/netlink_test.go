//go:build integration

package ipvswriter

import (
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlfamily"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// TestDataPlaneOpensOnlyTheNetlinkFamiliesItUses: on a node that cannot
// load xfrm_user (the lab leaves it out, as a minimal image or a hardened
// module policy would), the data plane opens, and it holds only
// NETLINK_ROUTE (the dummy interface), NETLINK_GENERIC (IPVS) and
// NETLINK_NETFILTER (nftables, conntrack) sockets.
func TestDataPlaneOpensOnlyTheNetlinkFamiliesItUses(t *testing.T) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_XFRM)
	if err == nil {
		unix.Close(fd)
		t.Fatal("the lab can open a NETLINK_XFRM socket: hack/vmlab/run.sh must leave xfrm_user out (ABSENT_MODULES)")
	}
	if !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Fatalf("NETLINK_XFRM socket: %v, want EPROTONOSUPPORT", err)
	}
	dp, err := proxier.NewDataPlane(proxier.DataPlaneConfig{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}})
	if err != nil {
		t.Fatalf("NewDataPlane without xfrm_user: %v", err)
	}
	defer dp.Close()
	open, err := nlfamily.Open()
	if err != nil {
		t.Fatal(err)
	}
	for proto, n := range open {
		switch proto {
		case unix.NETLINK_ROUTE, unix.NETLINK_GENERIC, unix.NETLINK_NETFILTER:
			t.Logf("%s: %d sockets", nlfamily.Name(proto), n)
		default:
			t.Errorf("%s: %d sockets open, a family the data plane does not use", nlfamily.Name(proto), n)
		}
	}
}
