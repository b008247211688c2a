//go:build integration

package traffic

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

// The harness self-tests prove the lab itself, without the project's
// data plane: IPVS is programmed by hand with moby/ipvs and masquerade
// by a hand-written google/nftables rule.

// selfTestLab is the default topology plus hand-made VIPs on kube-ipvs0
// and an IPVS handle.
func selfTestLab(t *testing.T, vips ...netip.Addr) (*harness, *ipvs.Handle) {
	t.Helper()
	h := newHarness(t)
	labnet.SetSysctl(t, h.root.Host, "net/ipv4/vs/conntrack", "1")
	h.selfTestDummy(vips...)
	ipv, err := ipvs.New("")
	h.must(err)
	t.Cleanup(ipv.Close)
	return h, ipv
}

// TestHarnessRouting: pods reach each other directly, and local and
// remote pods answer through a ClusterIP in both families, un-NATed; a
// second client and node-c are wired too.
func TestHarnessRouting(t *testing.T) {
	vip4, vip6 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::10")
	h, ipv := selfTestLab(t, vip4, vip6)
	a1, a2, b1, c1 := h.pod("pod-a1"), h.pod("pod-a2"), h.pod("pod-b1"), h.pod("pod-c1")
	h.ipvsService(ipv, vip4, unix.IPPROTO_TCP, 80, podTCPPort, a1.v4, b1.v4)
	h.ipvsService(ipv, vip4, unix.IPPROTO_UDP, 53, podUDPPort, a1.v4, b1.v4)
	h.ipvsService(ipv, vip6, unix.IPPROTO_TCP, 80, podTCPPort, a1.v6, b1.v6)

	t.Run("pods reach each other directly in both families", func(t *testing.T) {
		for _, to := range []*host{a2, b1, c1} {
			for _, addr := range []string{hostPort(to.v4, podTCPPort), hostPort(to.v6, podTCPPort)} {
				name, peer, err := h.TCP(a1, addr)
				if err != nil {
					t.Fatal(err)
				}
				if ip, _, _ := net.SplitHostPort(peer); name != to.Name || (ip != a1.v4.String() && ip != a1.v6.String()) {
					t.Errorf("%s: got %s peer %s, want %s seeing pod-a1", addr, name, peer, to.Name)
				}
			}
		}
	})
	t.Run("a pod reaches a local and a remote pod through a ClusterIP, un-NATed", func(t *testing.T) {
		for _, tc := range []struct {
			proto Proto
			addr  string
			peer  netip.Addr
		}{
			{TCP, hostPort(vip4, 80), a2.v4},
			{UDP, hostPort(vip4, 53), a2.v4},
			{TCP, hostPort(vip6, 80), a2.v6},
		} {
			got, err := h.Count(a2, tc.addr, tc.proto, 4)
			if err != nil {
				t.Fatalf("%v (so far %s)", err, formatCounts(got))
			}
			if got["pod-a1"] != 2 || got["pod-b1"] != 2 {
				t.Errorf("%s %s: rr over 4 gave %s, want pod-a1=2 pod-b1=2", tc.proto, tc.addr, formatCounts(got))
			}
			peers, err := h.Peers(a2, tc.addr, tc.proto, 2)
			if err != nil {
				t.Fatal(err)
			}
			for name, ip := range peers {
				if ip != tc.peer.String() {
					t.Errorf("%s %s: %s saw peer %s, want the client pod's %s", tc.proto, tc.addr, name, ip, tc.peer)
				}
			}
		}
	})
	h.serve(h.root, "node-a-host", 8181, 8181)
	t.Run("node-a reaches its own address over lo", func(t *testing.T) {
		for _, p := range []Proto{TCP, UDP} {
			if name, _, err := h.Exchange(h.root, p, hostPort(h.root.v4, 8181), h.timeout); err != nil || name != "node-a-host" {
				t.Errorf("%s: got %q, %v; want node-a-host", p, name, err)
			}
		}
	})
	c2 := h.addClient("client-2", 11)
	h.ipvsService(ipv, vip4, unix.IPPROTO_TCP, 82, podTCPPort, c1.v4)
	t.Run("a second client reaches a pod of node-c and node-a's own address", func(t *testing.T) {
		for _, tc := range []struct{ addr, want, peer string }{
			// No masquerade: node-c answers client-2 on-link, and the
			// client drops the SYN-ACK from a foreign address.
			{hostPort(vip4, 82), "", ""},
			{hostPort(h.root.v4, 8181), "node-a-host", c2.v4.String()},
			{hostPort(h.root.v6, 8181), "node-a-host", c2.v6.String()},
		} {
			name, peer, err := h.Exchange(c2, TCP, tc.addr, h.dropFor)
			ip, _, _ := net.SplitHostPort(peer)
			switch {
			case tc.want == "" && !labnet.IsTimeout(err):
				t.Errorf("%s: got %s, %v; want a timeout", tc.addr, name, err)
			case tc.want != "" && (err != nil || name != tc.want || ip != tc.peer):
				t.Errorf("%s: got %s peer %s, %v; want %s seeing %s", tc.addr, name, peer, err, tc.want, tc.peer)
			}
		}
	})
}

// TestHarnessMasquerade: the lab tells NATed from un-NATed traffic
// apart. Without masquerade a remote NodePort backend (which answers the
// client directly) and a hairpin connection (a martian source in the
// pod) fail; with it they work, and node-a itself reaches pods through a
// ClusterIP.
func TestHarnessMasquerade(t *testing.T) {
	vip4 := netip.MustParseAddr("10.96.0.10")
	h, ipv := selfTestLab(t, vip4)
	a1, b1 := h.pod("pod-a1"), h.pod("pod-b1")
	nodePort := h.root.v4
	h.ipvsService(ipv, vip4, unix.IPPROTO_TCP, 80, podTCPPort, a1.v4, b1.v4)
	h.ipvsService(ipv, nodePort, unix.IPPROTO_TCP, 30080, podTCPPort, b1.v4)
	h.ipvsService(ipv, vip4, unix.IPPROTO_TCP, 81, podTCPPort, a1.v4) // hairpin from pod-a1

	t.Run("without masquerade a remote NodePort backend answers the client directly and fails", func(t *testing.T) {
		if _, _, err := h.Exchange(h.client, TCP, hostPort(nodePort, 30080), h.dropFor); !labnet.IsTimeout(err) {
			t.Fatalf("NodePort to pod-b1 without masquerade: got %v, want a timeout", err)
		}
	})
	t.Run("without masquerade a hairpin connection fails", func(t *testing.T) {
		if _, _, err := h.Exchange(a1, TCP, hostPort(vip4, 81), h.dropFor); !labnet.IsTimeout(err) {
			t.Fatalf("pod-a1 to itself via %s:81: got %v, want a timeout", vip4, err)
		}
	})

	h.selfTestMasquerade(a1.v4)

	t.Run("the client reaches a remote backend through a NodePort, masqueraded to the node address", func(t *testing.T) {
		peers, err := h.Peers(h.client, hostPort(nodePort, 30080), TCP, 3)
		if err != nil {
			t.Fatal(err)
		}
		if peers["pod-b1"] != h.root.v4.String() || len(peers) != 1 {
			t.Errorf("backend → peer seen: %v, want pod-b1 → %s", peers, h.root.v4)
		}
	})
	t.Run("a pod reaches itself through a ClusterIP, masqueraded", func(t *testing.T) {
		name, peer, err := h.TCP(a1, hostPort(vip4, 81))
		if err != nil {
			t.Fatal(err)
		}
		if ip, _, _ := net.SplitHostPort(peer); name != "pod-a1" || ip != podGW4(1).String() {
			t.Errorf("got %s peer %s, want pod-a1 seeing the node's pod gateway %s", name, peer, podGW4(1))
		}
	})
	t.Run("node-a itself reaches local and remote pods through a ClusterIP, masqueraded", func(t *testing.T) {
		got, err := h.Count(h.root, hostPort(vip4, 80), TCP, 4)
		if err != nil {
			t.Fatalf("%v (so far %s)", err, formatCounts(got))
		}
		if got["pod-a1"] != 2 || got["pod-b1"] != 2 {
			t.Errorf("rr over 4 gave %s, want pod-a1=2 pod-b1=2", formatCounts(got))
		}
	})
}

// selfTestDummy puts the VIPs on a dummy kube-ipvs0, as the data plane
// would, removed at cleanup.
func (h *harness) selfTestDummy(vips ...netip.Addr) {
	h.t.Helper()
	addrs := make([]string, len(vips))
	for i, v := range vips {
		addrs[i] = v.String()
	}
	labnet.Dummy(h.t, "kube-ipvs0", addrs...)
}

// ipvsService adds a NAT-mode rr virtual server with weight-1
// destinations, deleted at cleanup.
func (h *harness) ipvsService(ipv *ipvs.Handle, vip netip.Addr, proto uint16, port, dport uint16, dests ...netip.Addr) {
	h.t.Helper()
	weights := make([]int, len(dests))
	for i := range weights {
		weights[i] = 1
	}
	h.ipvsServiceWith(ipv, vip, proto, port, "rr", 0, dport, dests, weights)
}

// ipvsServiceWith adds a NAT-mode virtual server with a scheduler, a
// persistence timeout (0 for none) and weighted destinations.
func (h *harness) ipvsServiceWith(ipv *ipvs.Handle, vip netip.Addr, proto, port uint16, sched string, timeout uint32, dport uint16, dests []netip.Addr, weights []int) {
	h.t.Helper()
	fam, mask := uint16(unix.AF_INET), uint32(0xffffffff)
	if !vip.Is4() {
		fam, mask = unix.AF_INET6, 128
	}
	svc := &ipvs.Service{Address: net.IP(vip.AsSlice()), Protocol: proto, Port: port, SchedName: sched, AddressFamily: fam, Netmask: mask}
	if timeout > 0 {
		svc.Flags, svc.Timeout = ipvsFlagPersistent, timeout
	}
	h.must(ipv.NewService(svc))
	h.t.Cleanup(func() { _ = ipv.DelService(svc) })
	for i, d := range dests {
		h.must(ipv.NewDestination(svc, &ipvs.Destination{Address: net.IP(d.AsSlice()), Port: dport, Weight: weights[i],
			ConnectionFlags: ipvs.ConnectionFlagMasq, AddressFamily: fam}))
	}
}

// ipvsFlagPersistent is IP_VS_SVC_F_PERSISTENT.
const ipvsFlagPersistent = 0x1

// selfTestMasquerade adds table ip kip-selftest, deleted at cleanup:
//
//	chain postrouting { type nat hook postrouting priority srcnat
//	  ip saddr 192.168.100.0/24 ip daddr 10.244.0.0/16 masquerade  # NodePort from the segment
//	  ip saddr 10.96.0.0/16 masquerade                             # node-a's own traffic to a VIP
//	  ip saddr <hairpin> ip daddr <hairpin> masquerade }           # hairpin
func (h *harness) selfTestMasquerade(hairpin netip.Addr) {
	h.t.Helper()
	c, err := nftables.New()
	h.must(err)
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "kip-selftest"})
	ch := c.AddChain(&nftables.Chain{Name: "postrouting", Table: tbl, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	seg, pods, vips := netip.MustParsePrefix("192.168.100.0/24"), netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/16")
	for _, match := range [][]expr.Any{
		slicesConcat(matchPrefix(12, seg), matchPrefix(16, pods)),
		matchPrefix(12, vips),
		slicesConcat(matchPrefix(12, prefix(hairpin, 32)), matchPrefix(16, prefix(hairpin, 32))),
	} {
		c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: append(match, &expr.Masq{})})
	}
	h.must(c.Flush())
	h.t.Cleanup(func() {
		c.DelTable(tbl)
		_ = c.Flush()
	})
}

// matchPrefix matches the IPv4 header field at offset (12 saddr, 16
// daddr) against p.
func matchPrefix(offset uint32, p netip.Prefix) []expr.Any {
	mask := net.CIDRMask(p.Bits(), 32)
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()},
	}
}

func slicesConcat(a, b []expr.Any) []expr.Any { return append(append([]expr.Any{}, a...), b...) }

// TestHarnessMeasurements proves the measuring tools the traffic tests
// rely on, against hand-programmed IPVS: wrr's counts over whole cycles
// are exact, persistence pins a client, an empty virtual server refuses
// fast (IPVS answers ICMP port unreachable by itself), a dropping nft
// rule reads as a timeout, and node-a's conntrack table lists IPVS
// flows.
func TestHarnessMeasurements(t *testing.T) {
	vip := netip.MustParseAddr("10.96.0.20")
	h, ipv := selfTestLab(t, vip)
	a1, b1, c1, a3 := h.pod("pod-a1"), h.pod("pod-b1"), h.pod("pod-c1"), h.pod("pod-a3")
	pods := []netip.Addr{a1.v4, b1.v4, c1.v4}
	h.ipvsServiceWith(ipv, vip, unix.IPPROTO_TCP, 80, "wrr", 0, podTCPPort, pods, []int{6, 3, 3})
	h.ipvsServiceWith(ipv, vip, unix.IPPROTO_UDP, 53, "wrr", 0, podUDPPort, pods, []int{7500, 2500, 2500})
	h.ipvsServiceWith(ipv, vip, unix.IPPROTO_TCP, 81, "rr", 10800, podTCPPort, pods, []int{1, 1, 1})
	h.ipvsServiceWith(ipv, vip, unix.IPPROTO_TCP, 82, "rr", 0, podTCPPort, nil, nil)
	h.ipvsServiceWith(ipv, vip, unix.IPPROTO_UDP, 82, "rr", 0, podUDPPort, nil, nil)
	// Conntrack runs in a namespace only once something needs it: IPVS
	// alone does not (with 0 flows listed), a NAT chain does.
	h.selfTestMasquerade(a1.v4)
	dns := netip.AddrPortFrom(vip, 53).String()
	before := labnet.CountUDPFlows(t, labnet.UDPFlow.SentTo)[dns]

	t.Run("wrr over whole cycles gives exact shares", func(t *testing.T) {
		for _, tc := range []struct {
			proto Proto
			port  int
			n     int
			want  string
		}{
			{TCP, 80, 40, "{pod-a1=20 pod-b1=10 pod-c1=10}"},
			{UDP, 53, 35, "{pod-a1=21 pod-b1=7 pod-c1=7}"},
		} {
			got, err := h.Count(a3, hostPort(vip, tc.port), tc.proto, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if formatCounts(got) != tc.want {
				t.Errorf("%s: got %s, want %s", tc.proto, formatCounts(got), tc.want)
			}
		}
	})
	t.Run("persistence pins a client to one backend", func(t *testing.T) {
		got, err := h.Count(a3, hostPort(vip, 81), TCP, 30)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Errorf("got %s, want one backend", formatCounts(got))
		}
	})
	t.Run("an empty virtual server refuses fast", func(t *testing.T) {
		for _, p := range []Proto{TCP, UDP} {
			_, _, err := h.Exchange(a3, p, hostPort(vip, 82), h.timeout)
			if !labnet.IsFastFailure(err) {
				t.Errorf("%s: got %v, want a fast failure", p, err)
			}
		}
	})
	t.Run("conntrack lists IPVS flows", func(t *testing.T) {
		// Earlier runs in this boot (-test.count) left flows to the VIP.
		if n := labnet.CountUDPFlows(t, labnet.UDPFlow.SentTo)[dns] - before; n != 35 {
			t.Errorf("%d new conntrack flows to %s/UDP, want 35", n, dns)
		}
	})
}
