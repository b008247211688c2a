//go:build integration

package traffic

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
	"github.com/vishvananda/netlink"
)

// TestStrictARPLeavesLoadBalancerIPsToTheAnnouncer: a LoadBalancer IP of
// the nodes' own segment, as MetalLB's L2 mode hands them out, is bound on
// kube-ipvs0 like every service address, on every node. With strictARP
// (arp_ignore=1, arp_announce=2) node-a's kernel does not answer ARP for
// it on the segment, which leaves the answer to MetalLB's elected speaker;
// once the client has that answer (here a static neighbour entry for
// node-a's MAC) node-a serves the address. Without strictARP node-a's
// kernel answers the ARP itself, as every node's would.
func TestStrictARPLeavesLoadBalancerIPsToTheAnnouncer(t *testing.T) {
	lbIP := netip.MustParseAddr("192.168.100.200")
	for _, tc := range []struct {
		name       string
		strictARP  bool
		answersARP bool
	}{
		{name: "with strictARP node-a leaves the ARP answer to the announcer", strictARP: true},
		{name: "without strictARP node-a answers ARP itself", answersARP: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLabWith(t, func(c *proxier.DataPlaneConfig) { c.StrictARP = tc.strictARP })
			// The kernel's defaults until the first sync; restored after.
			labnet.SetSysctl(t, l.root.Host, "net/ipv4/conf/all/arp_ignore", "0")
			labnet.SetSysctl(t, l.root.Host, "net/ipv4/conf/all/arp_announce", "0")
			l.setService(service("lb-l2", []string{"10.96.12.1"}, func(s *policy.Service) {
				s.LoadBalancerIPs = []netip.Addr{lbIP}
			}), l.ep("pod-a1"), l.ep("pod-b1"))
			l.resync()
			if !slices.Contains(kubeIPVS0Addrs(t), lbIP) {
				t.Fatalf("%s is not on kube-ipvs0: %v", lbIP, kubeIPVS0Addrs(t))
			}
			addr := hostPort(lbIP, 80)
			if tc.answersARP {
				l.expectOnly(t, l.client, addr, TCP, nConns, "pod-a1", "pod-b1")
				if mac, want := l.neighbourMAC(t, l.client, lbIP), l.bridgeMAC(t).String(); mac != want {
					t.Errorf("client's neighbour entry for %s: %q, want node-a's %s", lbIP, mac, want)
				}
				return
			}
			l.expectDrop(t, l.client, TCP, addr)
			if mac := l.neighbourMAC(t, l.client, lbIP); mac != "" {
				t.Errorf("client resolved %s to %s: node-a answered ARP for an address it holds only on kube-ipvs0", lbIP, mac)
			}
			// The speaker's answer: the client sends to node-a's MAC.
			nl := l.netlink(l.client)
			defer nl.Close()
			eth0, err := nl.LinkByName("eth0")
			l.must(err)
			l.must(nl.NeighSet(&netlink.Neigh{LinkIndex: eth0.Attrs().Index, Family: netlink.FAMILY_V4,
				State: netlink.NUD_PERMANENT, IP: net.IP(lbIP.AsSlice()), HardwareAddr: l.bridgeMAC(t)}))
			l.expectOnly(t, l.client, addr, TCP, nConns, "pod-a1", "pod-b1")
		})
	}
}

// bridgeMAC is node-a's MAC on the segment now: a bridge takes its
// ports' lowest MAC, so the one it had when made is stale.
func (l *lab) bridgeMAC(t *testing.T) net.HardwareAddr {
	t.Helper()
	br, err := l.rootNL.LinkByName(bridgeName)
	l.must(err)
	return br.Attrs().HardwareAddr
}

// neighbourMAC is x's resolved neighbour entry for ip on eth0 (reachable,
// stale, delayed, probing or permanent), or "" if it has none.
func (l *lab) neighbourMAC(t *testing.T, x *host, ip netip.Addr) string {
	t.Helper()
	nl := l.netlink(x)
	defer nl.Close()
	eth0, err := nl.LinkByName("eth0")
	l.must(err)
	neighs, err := nl.NeighList(eth0.Attrs().Index, netlink.FAMILY_V4)
	l.must(err)
	resolved := netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT
	for _, n := range neighs {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == ip && n.State&resolved != 0 {
			return n.HardwareAddr.String()
		}
	}
	return ""
}
