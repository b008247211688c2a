//go:build integration

package traffic

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

// The lab's fixed names and address plan. Node i (node-a is 1) has the
// node address 192.168.100.i and fd00:100::i on the shared segment and
// the pod ranges 10.244.i.0/24 and fd00:244:i::/64; its pods are .11,
// .12, … (::11, ::12, … in IPv6). Clients are 192.168.100.10 and up.
const (
	nodeA      = "node-a"
	bridgeName = "br-lab"  // the L2 segment, in node-a's (the root) namespace
	gwLinkLL   = "fe80::1" // node-side link-local of every pod veth: the pods' IPv6 gateway
	podTCPPort = 8080      // every pod serves TCP echo here
	podUDPPort = 5353      // and UDP echo here
	firstPod   = 11
	zoneA      = "zone-a"
	zoneB      = "zone-b"
)

var (
	// serviceRanges are routed by clients to node-a: cluster IPs and
	// load balancer addresses, so that off-cluster clients can use them.
	serviceRanges = []netip.Prefix{
		netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("fd00:96::/64"), netip.MustParsePrefix("2001:db8:100::/64"),
	}
	clusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/32")}
)

func nodeIP4(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 168, 100, byte(i)}) }
func nodeIP6(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("fd00:100::%d", i)) }
func podGW4(i int) netip.Addr  { return netip.AddrFrom4([4]byte{10, 244, byte(i), 1}) }
func podNet4(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24)
}
func podNet6(i int) netip.Prefix { return netip.MustParsePrefix(fmt.Sprintf("fd00:244:%d::/64", i)) }
func podIP4(i, n int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(i), byte(n)}) }
func podIP6(i, n int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("fd00:244:%d::%d", i, n)) }

// host is one namespace of the lab (a node, a pod or a client) with the
// addresses the harness gave it. The root namespace is node-a itself.
type host struct {
	*labnet.Host
	v4   netip.Addr // the host's own IPv4 address (node, pod or client address)
	v6   netip.Addr // the host's own IPv6 address
	node string     // for pods, the node they run on; for nodes, their own name
}

// nodeInfo is what the harness knows of a node besides its namespace.
type nodeInfo struct {
	*host
	index   int
	zone    string
	nextPod int
}

// harness is one test's lab: node-a (the root namespace), remote nodes,
// pods and clients, all torn down by t.Cleanup.
type harness struct {
	t       *testing.T
	timeout time.Duration // for exchanges expected to succeed, and for fast failures
	dropFor time.Duration // how long a dropped connection is waited for

	root    *host // node-a
	client  *host // the default external client, 192.168.100.10
	rootNL  *netlink.Handle
	bridge  netlink.Link
	nodes   map[string]*nodeInfo
	pods    map[string]*host
	clients map[string]*host
}

// newHarness builds the default topology (see doc.go): node-a (zone-a)
// with pod-a1, pod-a2 and pod-a3 (the usual in-cluster client), node-b
// (zone-a) with pod-b1 and pod-b2, node-c (zone-b) with pod-c1, and the
// external client at 192.168.100.10.
func newHarness(t *testing.T) *harness {
	t.Helper()
	h := newBareHarness(t)
	h.addNode("node-b", 2, zoneA)
	h.addNode("node-c", 3, zoneB)
	h.addPod(nodeA, "pod-a1")
	h.addPod(nodeA, "pod-a2")
	h.addPod(nodeA, "pod-a3")
	h.addPod("node-b", "pod-b1")
	h.addPod("node-b", "pod-b2")
	h.addPod("node-c", "pod-c1")
	h.client = h.addClient("client", 10)
	return h
}

// newBareHarness sets up node-a only: its sysctls (restored at cleanup)
// and the bridge carrying the node address.
func newBareHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, timeout: 5 * time.Second, dropFor: 2 * time.Second,
		nodes: map[string]*nodeInfo{}, pods: map[string]*host{}, clients: map[string]*host{}}
	t.Cleanup(func() { h.checkTornDown() })
	root, err := labnet.RootHost(nodeA)
	h.must(err)
	t.Cleanup(root.Close)
	h.root = &host{Host: root, v4: nodeIP4(1), v6: nodeIP6(1), node: nodeA}
	h.nodes[nodeA] = &nodeInfo{host: h.root, index: 1, zone: zoneA, nextPod: firstPod}
	for _, kv := range labnet.RouterSysctls {
		labnet.SetSysctl(t, root, kv[0], kv[1])
	}
	labnet.SetSysctl(t, root, "net/ipv6/conf/default/accept_dad", "0")
	h.rootNL, err = root.Netlink()
	h.must(err)
	t.Cleanup(h.rootNL.Close)
	// node-a's own connections to local addresses, and the resets and
	// ICMP errors answering them, travel over lo.
	labnet.LinkUp(t, "lo")

	snoop := false // IPv6 neighbour discovery is multicast: flood it
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}, MulticastSnooping: &snoop}
	h.must(h.rootNL.LinkAdd(br))
	t.Cleanup(func() { _ = h.rootNL.LinkDel(br) })
	h.bridge, err = h.rootNL.LinkByName(bridgeName)
	h.must(err)
	h.must(labnet.AddAddrs(h.rootNL, h.bridge, prefix(h.root.v4, 24), prefix(h.root.v6, 64)))
	h.must(h.rootNL.LinkSetUp(h.bridge))
	return h
}

func (h *harness) must(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("lab setup: %v", err)
	}
}

// node returns a node by name.
func (h *harness) node(name string) *nodeInfo { return mustFind(h.t, "node", h.nodes, name) }

// pod returns a pod by name.
func (h *harness) pod(name string) *host { return mustFind(h.t, "pod", h.pods, name) }

func mustFind[V any](t *testing.T, kind string, m map[string]V, name string) V {
	t.Helper()
	v, ok := m[name]
	if !ok {
		t.Fatalf("lab: no %s %q", kind, name)
	}
	return v
}

// addNode creates a remote node: a namespace on the segment at
// 192.168.100.<index>, forwarding, with routes to every other node's pod
// ranges and theirs to its own.
func (h *harness) addNode(name string, index int, zone string) *nodeInfo {
	h.t.Helper()
	n := &nodeInfo{host: h.newHost(name), index: index, zone: zone, nextPod: firstPod}
	n.node, n.v4, n.v6 = name, nodeIP4(index), nodeIP6(index)
	h.must(n.EnableRouting())
	h.plugIntoSegment(n.host, "vn-"+name)
	nl := h.netlink(n.host)
	defer nl.Close()
	for _, other := range h.nodes {
		// other's pods via other, from n; n's pods via n, from other.
		h.must(addRoutes(nl, other.index))
		onl := h.netlink(other.host)
		err := addRoutes(onl, index)
		onl.Close()
		h.must(err)
	}
	h.nodes[name] = n
	return n
}

// addRoutes routes node i's pod ranges via node i's addresses.
func addRoutes(nl *netlink.Handle, i int) error {
	for _, r := range []struct {
		dst netip.Prefix
		gw  netip.Addr
	}{{podNet4(i), nodeIP4(i)}, {podNet6(i), nodeIP6(i)}} {
		if err := nl.RouteAdd(&netlink.Route{Dst: labnet.IPNet(r.dst), Gw: net.IP(r.gw.AsSlice())}); err != nil {
			return fmt.Errorf("route %s via %s: %w", r.dst, r.gw, err)
		}
	}
	return nil
}

// addClient creates an external client on the segment at
// 192.168.100.<index> (fd00:100::<index>) that routes the service ranges
// to node-a.
func (h *harness) addClient(name string, index int) *host {
	h.t.Helper()
	c := h.newHost(name)
	c.v4, c.v6 = nodeIP4(index), nodeIP6(index)
	h.plugIntoSegment(c, "vc-"+name)
	nl := h.netlink(c)
	defer nl.Close()
	for _, p := range serviceRanges {
		gw := h.root.v4
		if !p.Addr().Is4() {
			gw = h.root.v6
		}
		h.must(nl.RouteAdd(&netlink.Route{Dst: labnet.IPNet(p), Gw: net.IP(gw.AsSlice())}))
	}
	h.clients[name] = c
	return c
}

// addPod creates a pod on a node: a veth whose node side carries the
// node's pod gateway 10.244.i.1/32 and fe80::1 with proxy ARP and a host
// route to the pod, and whose pod side (eth0) has 10.244.i.N/24 and
// fd00:244:i::N/128 with default routes via those gateways. The pod
// serves TCP and UDP echo on podTCPPort and podUDPPort.
func (h *harness) addPod(nodeName, name string) *host {
	h.t.Helper()
	n := h.node(nodeName)
	p := h.newHost(name)
	p.node = nodeName
	p.v4, p.v6 = podIP4(n.index, n.nextPod), podIP6(n.index, n.nextPod)
	n.nextPod++

	vethName := labnet.LinkName("vp-" + name)
	nl := h.netlink(n.host)
	defer nl.Close()
	link, err := labnet.AddVeth(nl, vethName, 0, p.Host)
	h.must(err)
	if n.IsRoot() {
		h.t.Cleanup(func() { _ = h.rootNL.LinkDel(link) })
	}
	h.must(labnet.AddAddrs(nl, link, prefix(podGW4(n.index), 32), prefix(netip.MustParseAddr(gwLinkLL), 64)))
	h.must(n.Sysctl("net/ipv4/conf/"+vethName+"/proxy_arp", "1"))
	h.must(n.Sysctl("net/ipv4/neigh/"+vethName+"/proxy_delay", "0")) // default: up to 0.8 s
	for _, a := range []netip.Addr{p.v4, p.v6} {
		h.must(nl.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: labnet.IPNet(prefix(a, a.BitLen())), Scope: netlink.SCOPE_LINK}))
	}

	pnl := h.netlink(p)
	defer pnl.Close()
	eth0 := h.upLink(pnl, "eth0")
	h.must(labnet.AddAddrs(pnl, eth0, prefix(p.v4, 24), prefix(p.v6, 128)))
	h.must(pnl.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: net.IP(podGW4(n.index).AsSlice())}))
	h.must(pnl.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: net.ParseIP(gwLinkLL)}))
	h.serve(p, name, podTCPPort, podUDPPort)
	h.pods[name] = p
	return p
}

// newHost creates a namespace with lo up, closed at cleanup. Links that
// arrive later skip IPv6 duplicate address detection: a tentative
// link-local address cannot source neighbour solicitations, which would
// delay forwarded IPv6 packets by a second.
func (h *harness) newHost(name string) *host {
	h.t.Helper()
	x, err := labnet.NewHost(name)
	h.must(err)
	h.t.Cleanup(x.Close)
	h.must(x.Sysctl("net/ipv6/conf/default/accept_dad", "0"))
	nl, err := x.Netlink()
	h.must(err)
	defer nl.Close()
	h.upLink(nl, "lo")
	return &host{Host: x}
}

// plugIntoSegment connects x's eth0 to node-a's bridge through a veth
// (rootSide is the bridge port) and gives it x.v4/24 and x.v6/64.
func (h *harness) plugIntoSegment(x *host, rootSide string) {
	h.t.Helper()
	veth, err := labnet.AddVeth(h.rootNL, rootSide, h.bridge.Attrs().Index, x.Host)
	h.must(err)
	h.t.Cleanup(func() { _ = h.rootNL.LinkDel(veth) })
	nl := h.netlink(x)
	defer nl.Close()
	eth0 := h.upLink(nl, "eth0")
	h.must(labnet.AddAddrs(nl, eth0, prefix(x.v4, 24), prefix(x.v6, 64)))
}

// netlink opens a NETLINK_ROUTE handle in x's namespace; the caller
// closes it.
func (h *harness) netlink(x *host) *netlink.Handle {
	h.t.Helper()
	nl, err := x.Netlink()
	h.must(err)
	return nl
}

// upLink sets a link up and returns it.
func (h *harness) upLink(nl *netlink.Handle, name string) netlink.Link {
	h.t.Helper()
	link, err := labnet.UpLinks(nl, name)
	h.must(err)
	return link
}

func prefix(a netip.Addr, bits int) netip.Prefix { return netip.PrefixFrom(a, bits) }

// rootLinks lists the root namespace's link names, sorted.
func rootLinks() ([]string, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names, nil
}

// labLink reports whether a root link belongs to the harness.
func labLink(name string) bool {
	return name == bridgeName || strings.HasPrefix(name, "vn-") || strings.HasPrefix(name, "vc-") || strings.HasPrefix(name, "vp-")
}

// checkTornDown fails the test if any harness link is left in the root
// namespace once everything else has been cleaned up.
func (h *harness) checkTornDown() {
	names, err := rootLinks()
	if err != nil {
		h.t.Errorf("lab teardown: list links: %v", err)
		return
	}
	for _, n := range names {
		if labLink(n) {
			h.t.Errorf("lab teardown: link %s left in the root namespace", n)
		}
	}
}
