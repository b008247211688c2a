//go:build integration

package nftwriter

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

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

func detectLocalPlan() policy.Plan {
	return policy.Plan{Node: "node-a", VirtualServers: []policy.VirtualServer{{
		Service: policy.ServiceKey{Namespace: "t", Name: "web"}, Kind: policy.KindClusterIP, Address: a(dlVIP), Port: 80,
		Protocol: policy.ProtocolTCP, Masquerade: policy.MasqueradeOffCluster,
		Destinations: []policy.Destination{{Address: a("192.168.77.2"), Port: 80, Weight: 1}}}}}
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
