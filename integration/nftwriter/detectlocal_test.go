//go:build integration

package nftwriter

import (
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The detectLocal lab, in both families: this namespace is the node. A
// service address, 10.96.0.80 (fd00:96::80), is routed to another node (a
// namespace on uplink 192.168.77.0/24, fd00:77::/64) that answers it
// with an echo server reporting the source it saw: the table alone
// decides the masquerade, no IPVS is needed. Two pods, both with
// addresses in the cluster CIDR:
//   - bridged: on the bridge kbr0 (10.244.1.0/24, fd00:244:1::/64: the
//     node's podCIDRs), as the CNI bridge plugin wires pods;
//   - routed: on its own veth, veth-routed (10.244.3.0/24,
//     fd00:244:3::/64), as labnet.NewPod and Calico wire them.
const dlBridge = "kbr0"

// dlFamily are the lab's addresses of one family.
type dlFamily struct {
	name                 string
	vip, dnsVIP          string // web's and dns's service addresses
	uplink, other        string // the node's and the other node's on the uplink: masquerade gives uplink
	uplinkBits           int
	bridged, routed      string // the pods
	bridgeGW, routedGW   string
	podBits              int
	cluster, nodePodCIDR netip.Prefix
}

var dlFamilies = []dlFamily{
	{name: "v4", vip: "10.96.0.80", dnsVIP: "10.96.0.81", uplink: "192.168.77.1", other: "192.168.77.2", uplinkBits: 24,
		bridged: "10.244.1.2", routed: "10.244.3.2", bridgeGW: "10.244.1.1", routedGW: "10.244.3.1", podBits: 24,
		cluster: netip.MustParsePrefix("10.244.0.0/16"), nodePodCIDR: netip.MustParsePrefix("10.244.1.0/24")},
	{name: "v6", vip: "fd00:96::80", dnsVIP: "fd00:96::81", uplink: "fd00:77::1", other: "fd00:77::2", uplinkBits: 64,
		bridged: "fd00:244:1::2", routed: "fd00:244:3::2", bridgeGW: "fd00:244:1::1", routedGW: "fd00:244:3::1", podBits: 64,
		cluster: netip.MustParsePrefix("fd00:244::/32"), nodePodCIDR: netip.MustParsePrefix("fd00:244:1::/64")},
}

func (f dlFamily) pfx(addr string, bits int) netip.Prefix { return netip.PrefixFrom(a(addr), bits) }

func hostPort(addr string, port int) string { return net.JoinHostPort(addr, strconv.Itoa(port)) }

// dlModes are the four detectLocalModes, as the table configuration each
// gives, with which pod is local in it.
func dlModes() []struct {
	name                      string
	cfg                       nft.Config
	bridgedLocal, routedLocal bool
} {
	var cluster, nodeCIDRs []netip.Prefix
	for _, f := range dlFamilies {
		cluster, nodeCIDRs = append(cluster, f.cluster), append(nodeCIDRs, f.nodePodCIDR)
	}
	return []struct {
		name                      string
		cfg                       nft.Config
		bridgedLocal, routedLocal bool
	}{
		{"ClusterCIDR", nft.Config{ClusterCIDRs: cluster}, true, true},
		{"NodeCIDR", nft.Config{ClusterCIDRs: nodeCIDRs}, true, false},
		{"BridgeInterface", nft.Config{ClusterCIDRs: cluster, PodInterface: dlBridge}, true, false},
		{"InterfaceNamePrefix", nft.Config{ClusterCIDRs: cluster, PodInterface: "veth-", PodInterfacePrefix: true}, false, true},
	}
}

// detectLocalPlan: web, a ClusterIP masqueraded off-cluster, and dns, a
// NOTRACK one whose destination is the other node's port 8080, in both
// families.
func detectLocalPlan() policy.Plan {
	var vss []policy.VirtualServer
	for _, f := range dlFamilies {
		vs := func(name, addr string, dst uint16) policy.VirtualServer {
			return policy.VirtualServer{Service: policy.ServiceKey{Namespace: "t", Name: name}, Kind: policy.KindClusterIP, Address: a(addr), Port: 80,
				Protocol: policy.ProtocolTCP, Masquerade: policy.MasqueradeOffCluster,
				Destinations: []policy.Destination{{Address: a(f.other), Port: dst, Weight: 1}}}
		}
		dns := vs("dns", f.dnsVIP, 8080)
		dns.NoTrack = true
		vss = append(vss, vs("web", f.vip, 80), dns)
	}
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
	route := func(nl *netlink.Handle, dst string, bits int, gw string) {
		t.Helper()
		r := &netlink.Route{Gw: net.ParseIP(gw)}
		if dst != "" {
			r.Dst = labnet.IPNet(netip.PrefixFrom(a(dst), bits))
		}
		must(nl.RouteAdd(r))
	}

	// The other node: the VIPs on its lo, its default routes back here.
	other := newHost(t, "other")
	up, err := labnet.AddVeth(root, "kip-up", 0, other)
	must(err)
	// Deleted here: a namespace goes some time after its last handle, and
	// the next test makes the link again.
	t.Cleanup(func() { _ = netlink.LinkDel(up) })
	onl, err := other.Netlink()
	must(err)
	defer onl.Close()
	eth0, err := labnet.UpLinks(onl, "lo", "eth0")
	must(err)
	lo, err := onl.LinkByName("lo")
	must(err)
	for _, f := range dlFamilies {
		must(labnet.AddAddrs(root, up, f.pfx(f.uplink, f.uplinkBits)))
		must(labnet.AddAddrs(onl, eth0, f.pfx(f.other, f.uplinkBits)))
		for _, vip := range []string{f.vip, f.dnsVIP} {
			must(labnet.AddAddrs(onl, lo, f.pfx(vip, a(vip).BitLen())))
			route(root, vip, a(vip).BitLen(), f.other)
		}
		route(onl, "", 0, f.uplink)
		labnet.Echo{Name: "other"}.ServeTCP(t, other, "tcp", hostPort(f.vip, 80))
		labnet.Echo{Name: "other"}.ServeTCP(t, other, "tcp", hostPort(f.other, 8080))
	}

	// The bridged pod. IPv6 neighbour discovery is multicast: the bridge
	// floods it.
	snoop := false
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: dlBridge}, MulticastSnooping: &snoop}
	must(root.LinkAdd(br))
	t.Cleanup(func() { _ = netlink.LinkDel(br) })
	brLink, err := labnet.UpLinks(root, dlBridge)
	must(err)
	bridged = newHost(t, "bridged")
	port, err := labnet.AddVeth(root, "kbr0-p1", brLink.Attrs().Index, bridged)
	must(err)
	t.Cleanup(func() { _ = netlink.LinkDel(port) })
	bnl, err := bridged.Netlink()
	must(err)
	defer bnl.Close()
	beth0, err := labnet.UpLinks(bnl, "lo", "eth0")
	must(err)

	// The routed pod, veth-routed: labnet.NewPod wires its IPv4 side.
	pod := labnet.NewPod(t, "routed", 3)
	rnl, err := pod.Netlink()
	must(err)
	defer rnl.Close()
	reth0, err := rnl.LinkByName("eth0")
	must(err)
	veth, err := root.LinkByName(labnet.LinkName("veth-routed"))
	must(err)
	for _, f := range dlFamilies {
		must(labnet.AddAddrs(root, brLink, f.pfx(f.bridgeGW, f.podBits)))
		must(labnet.AddAddrs(bnl, beth0, f.pfx(f.bridged, f.podBits)))
		route(bnl, "", 0, f.bridgeGW)
		if f.name == "v6" {
			must(labnet.AddAddrs(root, veth, f.pfx(f.routedGW, f.podBits)))
			must(labnet.AddAddrs(rnl, reth0, f.pfx(f.routed, f.podBits)))
			route(rnl, "", 0, f.routedGW)
		}
	}
	return bridged, pod.Host
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

// programTable programs the plan with cfg, deleted when the test ends,
// and checks that the kernel took the rules as written (fib daddr
// oifname in raw-prerouting, oifname in raw-output): its table reads back
// as the fake's.
func programTable(t *testing.T, cfg nft.Config) {
	t.Helper()
	w, err := nft.NewLinux(cfg)
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
	f := nft.NewFake()
	if err := nft.New(cfg, f).Resync(plan); err != nil {
		t.Fatalf("fake Resync: %v", err)
	}
	if diff := cmp.Diff(f.Dump(), kernelDump(t, newConn(t))); diff != "" {
		t.Errorf("kernel differs from the fake (-fake +kernel):\n%s", diff)
	}
}

// TestDetectLocalDecidesMasquerade: with the same table and pods, which
// pod's connection to a ClusterIP is masqueraded (seen from the node's
// uplink address) or keeps its address depends on the mode alone, as
// kube-proxy's detectLocalMode: ClusterCIDR takes both pods as local;
// NodeCIDR (the node's podCIDRs, the bridge's subnets) only the bridged
// one; BridgeInterface only what comes in on kbr0; InterfaceNamePrefix
// "veth-" only what comes in on a veth-* interface. Both pods' addresses
// are in the cluster CIDRs: in the interface modes the address decides
// nothing.
func TestDetectLocalDecidesMasquerade(t *testing.T) {
	bridged, routed := detectLocalLab(t)
	for _, m := range dlModes() {
		t.Run(m.name, func(t *testing.T) {
			programTable(t, m.cfg)
			for _, f := range dlFamilies {
				for _, c := range []struct {
					who, addr string
					from      *labnet.Host
					local     bool
				}{{"bridged pod", f.bridged, bridged, m.bridgedLocal}, {"routed pod", f.routed, routed, m.routedLocal}} {
					want := f.uplink
					if c.local {
						want = c.addr
					}
					_, peer, err := labnet.Exchange(c.from, labnet.TCP, hostPort(f.vip, 80), 10*time.Second)
					if err != nil {
						t.Errorf("%s %s: %v", f.name, c.who, err)
						continue
					}
					ap, err := netip.ParseAddrPort(peer)
					if err != nil {
						t.Errorf("%s %s: peer %q: %v", f.name, c.who, peer, err)
						continue
					}
					if got := ap.Addr().Unmap(); got != a(want) {
						t.Errorf("%s %s: the other node saw %s, want %s", f.name, c.who, got, want)
					} else {
						t.Logf("%s %s: the other node saw %s", f.name, c.who, got)
					}
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
	for _, m := range dlModes() {
		t.Run(m.name, func(t *testing.T) {
			if err := netlink.ConntrackTableFlush(netlink.ConntrackTable); err != nil {
				t.Fatalf("flush conntrack: %v", err)
			}
			programTable(t, m.cfg)
			for _, f := range dlFamilies {
				for _, c := range []struct {
					who, addr string
					from      *labnet.Host
					local     bool
				}{{"bridged pod", f.bridged, bridged, m.bridgedLocal}, {"routed pod", f.routed, routed, m.routedLocal}} {
					if _, _, err := labnet.Exchange(c.from, labnet.TCP, hostPort(f.other, 8080), 10*time.Second); err != nil {
						t.Errorf("%s %s: %v", f.name, c.who, err)
						continue
					}
					n := flowsBetween(t, a(c.addr), a(f.other))
					switch {
					case c.local && n != 0:
						t.Errorf("%s %s (local): %d conntrack entries, want 0 (untracked both ways)", f.name, c.who, n)
					case !c.local && n != 1:
						t.Errorf("%s %s (not local): %d conntrack entries, want 1 (tracked both ways)", f.name, c.who, n)
					default:
						t.Logf("%s %s (local %t): %d conntrack entries", f.name, c.who, c.local, n)
					}
				}
			}
		})
	}
}

// flowsBetween counts the conntrack entries of TCP flows between pod
// and dest, started by either.
func flowsBetween(t *testing.T, pod, dest netip.Addr) int {
	t.Helper()
	family := uint8(unix.AF_INET)
	if pod.Is6() {
		family = unix.AF_INET6
	}
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, netlink.InetFamily(family))
	if err != nil {
		t.Fatalf("list conntrack: %v", err)
	}
	n := 0
	for _, f := range flows {
		src, _ := netip.AddrFromSlice(f.Forward.SrcIP)
		dst, _ := netip.AddrFromSlice(f.Forward.DstIP)
		src, dst = src.Unmap(), dst.Unmap()
		if f.Forward.Protocol == unix.IPPROTO_TCP && (src == pod && dst == dest || src == dest && dst == pod) {
			n++
		}
	}
	return n
}
