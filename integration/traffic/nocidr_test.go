//go:build integration

package traffic

import (
	"net/netip"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// TestHostClientFromVIPIsMasqueradedWithoutClusterCIDR: without a
// cluster CIDR of the family, the plan masquerades no ClusterIP traffic
// (Never), yet node-a's own connection to a ClusterIP whose only
// endpoint is on node-b is masqueraded, as kube-proxy's IPVS mode does:
// the kernel sources it from the VIP on kube-ipvs0, and node-b holds the
// same VIP (every node of a cluster does), so an un-masqueraded reply
// would be delivered there. The IPv6 family of a node whose cluster
// CIDR is IPv4 only is the same case.
func TestHostClientFromVIPIsMasqueradedWithoutClusterCIDR(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cidrs []string
		vips  []netip.Addr
	}{
		{"no cluster CIDR: both families", nil,
			[]netip.Addr{netip.MustParseAddr("10.96.9.1"), netip.MustParseAddr("fd00:96::9:1")}},
		{"an IPv4 cluster CIDR only: the IPv6 family", []string{"10.244.0.0/16"},
			[]netip.Addr{netip.MustParseAddr("fd00:96::9:2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t, func(c *policy.Config) { c.ClusterCIDRs = tc.cidrs })
			var vips []string
			for _, v := range tc.vips {
				vips = append(vips, v.String())
			}
			s := service("from-vip", vips)
			l.setService(s, l.ep("pod-b1"), l.ep6("pod-b1"))
			l.resync()
			nodeB := l.netlink(l.node("node-b").host)
			defer nodeB.Close()
			lo := l.upLink(nodeB, "lo")
			for _, vip := range tc.vips {
				if m := l.virtualServer(s.Key, policy.KindClusterIP, policy.ProtocolTCP, vip.Is4()).Masquerade; m != policy.MasqueradeNever {
					t.Fatalf("plan: %s masquerade %q, want Never (the case under test)", vip, m)
				}
				l.must(labnet.AddAddrs(nodeB, lo, netip.PrefixFrom(vip, vip.BitLen())))
			}
			for _, vip := range tc.vips {
				want := l.root.v4
				if !vip.Is4() {
					want = l.root.v6
				}
				checkPeersProto(t, l.harness, l.root, TCP, hostPort(vip, 80), want.String())
			}
		})
	}
}
