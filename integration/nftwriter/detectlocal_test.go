//go:build integration

package nftwriter

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The detectLocal lab: this namespace is the node. A service address,
// 10.96.0.80, is routed to another node (a namespace on uplink
// 192.168.77.0/24) that answers it with an echo server reporting the
// source it saw: the table alone decides the masquerade, no IPVS is
// needed. Two pods, both with addresses in the cluster CIDR:
//   - bridged: on the bridge kbr0 (10.244.1.0/24, the node's podCIDR),
//     as the CNI bridge plugin wires pods;
//   - routed: on its own veth, veth-routed (10.244.3.0/24), as
//     labnet.NewPod and Calico wire them.
const (
	dlVIP      = "10.96.0.80"
	dlBridge   = "kbr0"
	dlUplinkIP = "192.168.77.1" // the node's address toward the other node: what masquerade gives
)

// detectLocalPlan: web, a ClusterIP masqueraded off-cluster, and dns, a
// NOTRACK one whose destination is 192.168.77.2:8080 on the other node.
func detectLocalPlan() policy.Plan {
	vs := func(name, addr string, port uint16, dst uint16) policy.VirtualServer {
		return policy.VirtualServer{Service: policy.ServiceKey{Namespace: "t", Name: name}, Kind: policy.KindClusterIP, Address: a(addr), Port: port,
			Protocol: policy.ProtocolTCP, Masquerade: policy.MasqueradeOffCluster,
			Destinations: []policy.Destination{{Address: a("192.168.77.2"), Port: dst, Weight: 1}}}
	}
	web, dns := vs("web", dlVIP, 80, 80), vs("dns", "10.96.0.81", 80, 8080)
	dns.NoTrack = true
	vss := []policy.VirtualServer{web, dns}
	policy.SortVirtualServers(vss)
	return policy.Plan{Node: "node-a", VirtualServers: vss}
}

// detectLocalLab builds the lab and returns the two pods.
func detectLocalLab(t *testing.T) (bridged, routed *labnet.Host) {
	t.Helper()
	labnet.LinkUp(t, "lo")
	for _, kv := range labnet.RouterSysctls {
		labnet.SetSysctl(t, nil, kv[0], kv[1])
	}
	root, err := (*labnet.Host)(nil).Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// The other node: the VIP on its lo, its default route back here.
	other := newHost(t, "other")
	up, err := labnet.AddVeth(root, "kip-up", 0, other)
	must(err)
	// Deleted here: a namespace goes some time after its last handle, and
	// the next test makes the link again.
	t.Cleanup(func() { _ = netlink.LinkDel(up) })
	must(labnet.AddAddrs(root, up, netip.MustParsePrefix(dlUplinkIP+"/24")))
	must(root.RouteAdd(&netlink.Route{Dst: labnet.IPNet(netip.MustParsePrefix(dlVIP + "/32")), Gw: net.ParseIP("192.168.77.2")}))
	onl, err := other.Netlink()
	must(err)
	defer onl.Close()
	eth0, err := labnet.UpLinks(onl, "lo", "eth0")
	must(err)
	must(labnet.AddAddrs(onl, eth0, netip.MustParsePrefix("192.168.77.2/24")))
	lo, err := onl.LinkByName("lo")
	must(err)
	must(labnet.AddAddrs(onl, lo, netip.MustParsePrefix(dlVIP+"/32")))
	must(onl.RouteAdd(&netlink.Route{Gw: net.ParseIP(dlUplinkIP)}))
	labnet.Echo{Name: "other"}.ServeTCP(t, other, "tcp4", dlVIP+":80")
	labnet.Echo{Name: "other"}.ServeTCP(t, other, "tcp4", "192.168.77.2:8080")

	// The bridged pod.
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: dlBridge}}
	must(root.LinkAdd(br))
	t.Cleanup(func() { _ = netlink.LinkDel(br) })
	brLink, err := labnet.UpLinks(root, dlBridge)
	must(err)
	must(labnet.AddAddrs(root, brLink, netip.MustParsePrefix("10.244.1.1/24")))
	bridged = newHost(t, "bridged")
	port, err := labnet.AddVeth(root, "kbr0-p1", brLink.Attrs().Index, bridged)
	must(err)
	t.Cleanup(func() { _ = netlink.LinkDel(port) })
	bnl, err := bridged.Netlink()
	must(err)
	defer bnl.Close()
	beth0, err := labnet.UpLinks(bnl, "lo", "eth0")
	must(err)
	must(labnet.AddAddrs(bnl, beth0, netip.MustParsePrefix("10.244.1.2/24")))
	must(bnl.RouteAdd(&netlink.Route{Gw: net.ParseIP("10.244.1.1")}))

	// The routed pod: veth-routed, 10.244.3.2.
	return bridged, labnet.NewPod(t, "routed", 3).Host
}

func newHost(t *testing.T, name string) *labnet.Host {
	t.Helper()
	h, err := labnet.NewHost(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// TestDetectLocalDecidesMasquerade: with the same table and pods, which
// pod's connection to a ClusterIP is masqueraded (seen from the node's
// uplink address) or keeps its address depends on the mode alone, as
// kube-proxy's detectLocalMode: ClusterCIDR takes both pods as local;
// NodeCIDR (the node's podCIDR, the bridge's subnet) only the bridged
// one; BridgeInterface only what comes in on kbr0; InterfaceNamePrefix
// "veth-" only what comes in on a veth-* interface. Both pods' addresses
// are in the cluster CIDR: in the interface modes the address decides
// nothing.
func TestDetectLocalDecidesMasquerade(t *testing.T) {
	bridged, routed := detectLocalLab(t)
	cluster := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	for _, tc := range []struct {
		name            string
		cfg             nft.Config
		bridged, routed string // the source the other node sees
	}{
		{"ClusterCIDR", nft.Config{ClusterCIDRs: cluster}, "10.244.1.2", "10.244.3.2"},
		{"NodeCIDR", nft.Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}, "10.244.1.2", dlUplinkIP},
		{"BridgeInterface", nft.Config{ClusterCIDRs: cluster, PodInterface: dlBridge}, "10.244.1.2", dlUplinkIP},
		{"InterfaceNamePrefix", nft.Config{ClusterCIDRs: cluster, PodInterface: "veth-", PodInterfacePrefix: true}, dlUplinkIP, "10.244.3.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := nft.NewLinux(tc.cfg)
			if err != nil {
				t.Fatalf("NewLinux: %v", err)
			}
			t.Cleanup(func() {
				if err := w.Cleanup(); err != nil {
					t.Errorf("Cleanup: %v", err)
				}
			})
			plan := detectLocalPlan()
			if err := w.Resync(plan); err != nil {
				t.Fatalf("Resync: %v", err)
			}
			// The kernel took the rules as written: fib daddr oifname in
			// raw-prerouting, oifname in raw-output.
			f := nft.NewFake()
			if err := nft.New(tc.cfg, f).Resync(plan); err != nil {
				t.Fatalf("fake Resync: %v", err)
			}
			if diff := cmp.Diff(f.Dump(), kernelDump(t, newConn(t))); diff != "" {
				t.Errorf("kernel differs from the fake (-fake +kernel):\n%s", diff)
			}
			for _, c := range []struct {
				who  string
				from *labnet.Host
				want string
			}{{"bridged pod", bridged, tc.bridged}, {"routed pod", routed, tc.routed}} {
				_, peer, err := labnet.Exchange(c.from, labnet.TCP, dlVIP+":80", 3*time.Second)
				if err != nil {
					t.Errorf("%s: %v", c.who, err)
					continue
				}
				ap, err := netip.ParseAddrPort(peer)
				if err != nil {
					t.Errorf("%s: peer %q: %v", c.who, peer, err)
					continue
				}
				if got := ap.Addr().String(); got != c.want {
					t.Errorf("%s: the other node saw %s, want %s", c.who, got, c.want)
				} else {
					t.Logf("%s: the other node saw %s", c.who, got)
				}
			}
		})
	}
}

// TestDetectLocalDecidesNoTrack: a pod's connection straight to a
// NOTRACK service's destination (what another node's IPVS sends) is
// untracked both ways when the pod is local in the mode, and tracked
// both ways when it is not: the request by the interface it comes in on,
// the reply by the interface the route to the pod leaves by (fib daddr
// oifname in raw-prerouting). A connection untracked one way only would
// leave a conntrack entry started by the reply.
func TestDetectLocalDecidesNoTrack(t *testing.T) {
	bridged, routed := detectLocalLab(t)
	cluster := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
	for _, tc := range []struct {
		name                      string
		cfg                       nft.Config
		bridgedLocal, routedLocal bool
	}{
		{"ClusterCIDR", nft.Config{ClusterCIDRs: cluster}, true, true},
		{"NodeCIDR", nft.Config{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}, true, false},
		{"BridgeInterface", nft.Config{ClusterCIDRs: cluster, PodInterface: dlBridge}, true, false},
		{"InterfaceNamePrefix", nft.Config{ClusterCIDRs: cluster, PodInterface: "veth-", PodInterfacePrefix: true}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := netlink.ConntrackTableFlush(netlink.ConntrackTable); err != nil {
				t.Fatalf("flush conntrack: %v", err)
			}
			w, err := nft.NewLinux(tc.cfg)
			if err != nil {
				t.Fatalf("NewLinux: %v", err)
			}
			t.Cleanup(func() {
				if err := w.Cleanup(); err != nil {
					t.Errorf("Cleanup: %v", err)
				}
			})
			if err := w.Resync(detectLocalPlan()); err != nil {
				t.Fatalf("Resync: %v", err)
			}
			for _, c := range []struct {
				who   string
				from  *labnet.Host
				ip    netip.Addr
				local bool
			}{{"bridged pod", bridged, a("10.244.1.2"), tc.bridgedLocal}, {"routed pod", routed, a("10.244.3.2"), tc.routedLocal}} {
				if _, _, err := labnet.Exchange(c.from, labnet.TCP, "192.168.77.2:8080", 3*time.Second); err != nil {
					t.Errorf("%s: %v", c.who, err)
					continue
				}
				n := flowsBetween(t, c.ip, a("192.168.77.2"))
				switch {
				case c.local && n != 0:
					t.Errorf("%s (local): %d conntrack entries, want 0 (untracked both ways)", c.who, n)
				case !c.local && n != 1:
					t.Errorf("%s (not local): %d conntrack entries, want 1 (tracked both ways)", c.who, n)
				default:
					t.Logf("%s (local %t): %d conntrack entries", c.who, c.local, n)
				}
			}
		})
	}
}

// flowsBetween counts the conntrack entries of TCP flows between pod
// and dest, started by either.
func flowsBetween(t *testing.T, pod, dest netip.Addr) int {
	t.Helper()
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatalf("list conntrack: %v", err)
	}
	n := 0
	for _, f := range flows {
		src, dst := f.Forward.SrcIP.String(), f.Forward.DstIP.String()
		if f.Forward.Protocol == unix.IPPROTO_TCP && (src == pod.String() && dst == dest.String() || src == dest.String() && dst == pod.String()) {
			n++
		}
	}
	return n
}
