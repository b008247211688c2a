//go:build integration

package demo

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/integration/labnet"
)

// The lab's fixed names and the addresses examples/ does not give. Node
// and pod addresses come from the API objects; these are the rest.
const (
	bridgeName = "demo-lan" // the nodes' L2 segment, in node-a's (the root) namespace
	gwLinkLL   = "fe80::1"  // node-a's side of every pod veth: the pods' IPv6 gateway
)

var (
	podGateway4  = netip.MustParseAddr("10.244.1.1")    // node-a's side of every pod veth
	podGateway6  = netip.MustParseAddr("fd00:244:1::1") // and its IPv6 address there
	podClient4   = netip.MustParseAddr("10.244.1.99")   // a client pod on node-a
	podClient6   = netip.MustParseAddr("fd00:244:1::99")
	client4      = netip.MustParseAddr("192.168.10.100") // an external client on the nodes' segment
	client6      = netip.MustParseAddr("fd00:10::100")
	lbClientLink = netip.MustParseAddr("192.168.10.101") // a second one, whose connections to
	lbClient4    = netip.MustParseAddr("203.0.113.7")    // the load balancer range come from here
	lbRange      = netip.MustParsePrefix("198.51.100.0/24")
)

// backend is one endpoint address and its ports, as the EndpointSlices
// say.
type backend struct {
	addr  netip.Addr
	ports []discoveryv1.EndpointPort
}

// client is a lab namespace that sends traffic, with its addresses.
type client struct {
	*labnet.Host
	v4, v6 netip.Addr
}

func (c *client) String() string {
	if c == nil {
		return nodeName
	}
	return c.Name
}

// host returns the namespace to dial from: nil is node-a itself.
func (c *client) host() *labnet.Host {
	if c == nil {
		return nil
	}
	return c.Host
}

// lab is the demo's network: node-a is the root namespace, with its
// pods in one namespace behind a veth; the other nodes are namespaces on
// a bridge that carries node-a's Node addresses, holding their pods'
// addresses on lo; a pod of node-a and two external clients send
// traffic.
type lab struct {
	t        *testing.T
	nl       *netlink.Handle // the root namespace's
	bridge   netlink.Link
	nodeA    []netip.Addr // node-a's Node InternalIPs, on the bridge
	podsA    *labnet.Host // node-a's pods
	podsALnk netlink.Link // node-a's side of podsA's veth
	pod      *client      // a client pod on node-a
	ext      *client      // an external client, outside the LB source ranges
	lbExt    *client      // an external client inside them
}

// buildLab builds the lab from the API's Nodes and EndpointSlices, and
// prints what it built.
func buildLab(t *testing.T, admin kubernetes.Interface) *lab {
	t.Helper()
	nodes := nodeAddrs(t, admin)
	byNode := endpointsByNode(t, admin)
	root, err := (*labnet.Host)(nil).Netlink()
	must(t, err)
	t.Cleanup(root.Close)
	l := &lab{t: t, nl: root}
	for _, kv := range labnet.RouterSysctls {
		labnet.SetSysctl(t, nil, kv[0], kv[1])
	}
	labnet.SetSysctl(t, nil, "net/ipv6/conf/default/accept_dad", "0")
	labnet.LinkUp(t, "lo")

	l.nodeA = nodes[nodeName]
	if len(l.nodeA) == 0 {
		t.Fatalf("the API's Node %s has no InternalIP: the host half writes them with UpdateStatus", nodeName)
	}
	snoop := false // IPv6 neighbour discovery is multicast: flood it
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridgeName}, MulticastSnooping: &snoop}
	must(t, root.LinkAdd(br))
	t.Cleanup(func() { _ = root.LinkDel(br) })
	l.bridge, err = labnet.UpLinks(root, bridgeName)
	must(t, err)
	for _, a := range l.nodeA {
		must(t, labnet.AddAddrs(root, l.bridge, netip.PrefixFrom(a, map[bool]int{true: 24, false: 64}[a.Is4()])))
	}
	fmt.Printf("lab: %s is this VM's root netns, forwarding IPv4 and IPv6; its Node's InternalIPs %v are on bridge %s; its pods' gateway is %s, %s\n",
		nodeName, l.nodeA, bridgeName, podGateway4, podGateway6)

	l.podsA, l.podsALnk = l.podNetns("pods-"+nodeName, "dp-"+nodeName)
	l.addPodAddrs(byNode[nodeName]...)
	fmt.Printf("lab: %s's pods %s in netns pods-%s\n", nodeName, formatBackends(byNode[nodeName]), nodeName)
	for _, node := range slices.Sorted(maps.Keys(byNode)) {
		if node != nodeName {
			l.remoteNode(node, nodes[node], byNode[node])
		}
	}

	l.addClients()
	return l
}

// addClients adds the client pod of node-a and the two external clients.
func (l *lab) addClients() {
	l.t.Helper()
	pod, _ := l.podNetns("pod-client", "dp-pod-client")
	l.pod = &client{Host: pod, v4: podClient4, v6: podClient6}
	l.addAddrsTo(pod, l.nl, "dp-pod-client", podClient4, podClient6)
	fmt.Printf("lab: pod-client, a pod of %s: %s, %s\n", nodeName, podClient4, podClient6)

	l.ext = l.segmentHost("client", "dc-client", client4, client6)
	l.routeToNodeA(l.ext, lbRange, netip.Addr{})
	fmt.Printf("lab: client, an external client on %s: %s, %s (routes %s via %s)\n", bridgeName, client4, client6, lbRange, l.nodeA[0])
	l.lbExt = l.segmentHost("client-lb", "dc-client-lb", lbClientLink, netip.Addr{})
	l.lbExt.v4 = lbClient4
	l.addAddrsTo(l.lbExt.Host, nil, "", lbClient4)
	l.routeToNodeA(l.lbExt, lbRange, lbClient4)
	must(l.t, l.nl.RouteAdd(&netlink.Route{Dst: labnet.IPNet(netip.PrefixFrom(lbClient4, 32)), Gw: net.IP(lbClientLink.AsSlice())}))
	fmt.Printf("lab: client-lb, an external client on %s: %s, and %s for its connections to %s\n", bridgeName, lbClientLink, lbClient4, lbRange)
}

// nodeAddrs reads every Node's InternalIPs from the API.
func nodeAddrs(t *testing.T, admin kubernetes.Interface) map[string][]netip.Addr {
	t.Helper()
	list, err := admin.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	must(t, err)
	out := map[string][]netip.Addr{}
	for _, n := range list.Items {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP {
				out[n.Name] = append(out[n.Name], ip)
			}
		}
	}
	return out
}

// endpointsByNode lists the EndpointSlices of both families and groups
// their addresses by node.
func endpointsByNode(t *testing.T, admin kubernetes.Interface) map[string][]backend {
	t.Helper()
	list, err := admin.DiscoveryV1().EndpointSlices("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list EndpointSlices: %v", err)
	}
	out := map[string][]backend{}
	for _, s := range list.Items {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.NodeName == nil {
				continue
			}
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					out[*e.NodeName] = append(out[*e.NodeName], backend{addr: ip, ports: s.Ports})
				}
			}
		}
	}
	return out
}

// newNetns creates a namespace with lo up whose later links skip IPv6
// duplicate address detection (a tentative link-local address cannot
// source neighbour solicitations); it is closed when the test ends.
func (l *lab) newNetns(name string) *labnet.Host {
	l.t.Helper()
	h, err := labnet.NewHost(name)
	must(l.t, err)
	l.t.Cleanup(h.Close)
	must(l.t, h.Sysctl("net/ipv6/conf/default/accept_dad", "0"))
	nl, err := h.Netlink()
	must(l.t, err)
	defer nl.Close()
	_, err = labnet.UpLinks(nl, "lo")
	must(l.t, err)
	return h
}

// podNetns creates a namespace wired to node-a as a pod is: a veth whose
// node side carries the pod gateway (podGateway4/32, podGateway6/128
// and fe80::1) and
// whose eth0 has default routes via them. Addresses come later.
func (l *lab) podNetns(name, vethName string) (*labnet.Host, netlink.Link) {
	l.t.Helper()
	h := l.newNetns(name)
	veth, err := labnet.AddVeth(l.nl, vethName, 0, h)
	must(l.t, err)
	l.t.Cleanup(func() { _ = l.nl.LinkDel(veth) })
	must(l.t, labnet.AddAddrs(l.nl, veth, netip.PrefixFrom(podGateway4, 32), netip.PrefixFrom(podGateway6, 128),
		netip.MustParsePrefix(gwLinkLL+"/64")))
	nl, err := h.Netlink()
	must(l.t, err)
	defer nl.Close()
	eth0, err := labnet.UpLinks(nl, "eth0")
	must(l.t, err)
	idx := eth0.Attrs().Index
	must(l.t, nl.RouteAdd(&netlink.Route{LinkIndex: idx, Gw: net.IP(podGateway4.AsSlice()), Flags: int(netlink.FLAG_ONLINK)}))
	must(l.t, nl.RouteAdd(&netlink.Route{LinkIndex: idx, Gw: net.ParseIP(gwLinkLL)}))
	return h, veth
}

// addAddrsTo gives h's eth0 host addresses and, when rootNL is set,
// routes them from node-a over the veth named vethName.
func (l *lab) addAddrsTo(h *labnet.Host, rootNL *netlink.Handle, vethName string, addrs ...netip.Addr) {
	l.t.Helper()
	nl, err := h.Netlink()
	must(l.t, err)
	defer nl.Close()
	eth0, err := nl.LinkByName("eth0")
	must(l.t, err)
	for _, a := range addrs {
		p := netip.PrefixFrom(a, a.BitLen())
		must(l.t, labnet.AddAddrs(nl, eth0, p))
		if rootNL == nil {
			continue
		}
		veth, err := rootNL.LinkByName(vethName)
		must(l.t, err)
		must(l.t, rootNL.RouteAdd(&netlink.Route{LinkIndex: veth.Attrs().Index, Dst: labnet.IPNet(p), Scope: netlink.SCOPE_LINK}))
	}
}

// addPodAddrs adds node-a's pods: their addresses in podsA and their
// echo servers.
func (l *lab) addPodAddrs(bs ...backend) {
	l.t.Helper()
	for _, b := range dedup(bs) {
		l.addAddrsTo(l.podsA, l.nl, l.podsALnk.Attrs().Name, b.addr)
	}
	for _, b := range bs {
		serve(l.t, l.podsA, b)
	}
}

// remoteNode plugs a node into the bridge with its Node's InternalIPs
// (and a lab IPv6 address if it has none), puts its pods' addresses on
// its lo with their echo servers, and routes them from node-a via it.
func (l *lab) remoteNode(name string, addrs []netip.Addr, pods []backend) {
	l.t.Helper()
	var v4, v6 netip.Addr
	for _, a := range addrs {
		if a.Is4() && !v4.IsValid() {
			v4 = a
		} else if a.Is6() && !v6.IsValid() {
			v6 = a
		}
	}
	if !v4.IsValid() {
		l.t.Fatalf("the API's Node %s has no IPv4 InternalIP", name)
	}
	v6note := ""
	if !v6.IsValid() {
		v6 = netip.MustParseAddr(fmt.Sprintf("fd00:10::%d", v4.As4()[3]))
		v6note = " (IPv6 lab-only: its Node has none)"
	}
	n := l.segmentHost(name, "dn-"+name, v4, v6)
	nl, err := n.Netlink()
	must(l.t, err)
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	must(l.t, err)
	for _, b := range dedup(pods) {
		must(l.t, labnet.AddAddrs(nl, lo, netip.PrefixFrom(b.addr, b.addr.BitLen())))
		gw := v4
		if b.addr.Is6() {
			gw = v6
		}
		must(l.t, l.nl.RouteAdd(&netlink.Route{Dst: labnet.IPNet(netip.PrefixFrom(b.addr, b.addr.BitLen())), Gw: net.IP(gw.AsSlice())}))
	}
	for _, b := range pods {
		serve(l.t, n.Host, b)
	}
	l.routeToNodeA(n, netip.Prefix{}, netip.Addr{})
	fmt.Printf("lab: %s, netns on %s: %s, %s%s; its pods %s\n", name, bridgeName, v4, v6, v6note, formatBackends(pods))
}

// segmentHost creates a namespace plugged into the bridge through the
// veth rootSide, with v4/24 and v6/64 (when valid) on its eth0.
func (l *lab) segmentHost(name, rootSide string, v4, v6 netip.Addr) *client {
	l.t.Helper()
	h := l.newNetns(name)
	veth, err := labnet.AddVeth(l.nl, rootSide, l.bridge.Attrs().Index, h)
	must(l.t, err)
	l.t.Cleanup(func() { _ = l.nl.LinkDel(veth) })
	nl, err := h.Netlink()
	must(l.t, err)
	defer nl.Close()
	eth0, err := labnet.UpLinks(nl, "eth0")
	must(l.t, err)
	must(l.t, labnet.AddAddrs(nl, eth0, netip.PrefixFrom(v4, 24)))
	if v6.IsValid() {
		must(l.t, labnet.AddAddrs(nl, eth0, netip.PrefixFrom(v6, 64)))
	}
	return &client{Host: h, v4: v4, v6: v6}
}

// routeToNodeA routes dst (a default route when dst is invalid) from c
// via node-a's addresses of the family; src, when valid, sources the
// IPv4 route.
func (l *lab) routeToNodeA(c *client, dst netip.Prefix, src netip.Addr) {
	l.t.Helper()
	nl, err := c.Netlink()
	must(l.t, err)
	defer nl.Close()
	for _, gw := range l.nodeA {
		if dst.IsValid() && dst.Addr().Is4() != gw.Is4() {
			continue
		}
		r := &netlink.Route{Gw: net.IP(gw.AsSlice())}
		if dst.IsValid() {
			r.Dst = labnet.IPNet(dst)
		}
		if src.IsValid() && gw.Is4() {
			r.Src = net.IP(src.AsSlice())
		}
		if err := nl.RouteAdd(r); err != nil {
			l.t.Fatalf("%s: route %v via %s: %v", c, dst, gw, err)
		}
	}
}

// serve starts an echo server named after the address on each of its
// ports.
func serve(t *testing.T, h *labnet.Host, b backend) {
	t.Helper()
	fam := "4"
	if b.addr.Is6() {
		fam = "6"
	}
	for _, p := range b.ports {
		if p.Port == nil {
			continue
		}
		addr := net.JoinHostPort(b.addr.String(), fmt.Sprint(*p.Port))
		e := labnet.Echo{Name: b.addr.String()}
		if p.Protocol != nil && *p.Protocol == corev1.ProtocolUDP {
			e.ServeUDP(t, h, "udp"+fam, addr)
		} else {
			e.ServeTCP(t, h, "tcp"+fam, addr)
		}
	}
}

// dedup keeps one backend per address (an address may be in several
// slices, with different ports).
func dedup(bs []backend) []backend {
	seen := map[netip.Addr]bool{}
	var out []backend
	for _, b := range bs {
		if !seen[b.addr] {
			seen[b.addr] = true
			out = append(out, b)
		}
	}
	return out
}

func formatBackends(bs []backend) string {
	var s []string
	for _, b := range dedup(bs) {
		s = append(s, b.addr.String())
	}
	slices.SortFunc(s, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
	return strings.Join(s, " ")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
