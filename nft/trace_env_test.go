package nft_test

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft/internal/packettrace"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// hosts names every address of the test node, its pods and its
// neighbours, as [IPv4, IPv6]: cases are written once with names and run
// in both families.
var hosts = map[string][2]string{
	"node":           {"192.168.1.10", "fd00:192:168:1::10"}, // eth0; NodePorts, a host-network endpoint
	"other-node":     {"192.168.1.11", "fd00:192:168:1::11"}, // a client outside the cluster CIDRs
	"bridge":         {"10.244.1.1", "fd00:10:244:1::1"},     // cni0: the node's pod-network address
	"pod-a":          {"10.244.1.5", "fd00:10:244:1::5"},     // on this node: destination of web, localep, dns
	"pod-b":          {"10.244.1.6", "fd00:10:244:1::6"},     // on this node: a client pod
	"pod-c":          {"10.244.2.7", "fd00:10:244:2::7"},     // on another node: a destination of most services
	"pod-d":          {"10.244.3.8", "fd00:10:244:3::8"},     // on another node: a client pod
	"pod-last":       {"10.244.255.255", "fd00:10:244:ffff:ffff:ffff:ffff:ffff"},
	"past-cidr":      {"10.245.0.0", "fd00:10:245::"}, // one past the cluster CIDR
	"client":         {"203.0.113.9", "2001:db8:113::9"},
	"allowed":        {"198.51.100.7", "2001:db8:100::7"}, // inside the load balancer's source range
	"range-last":     {"198.51.100.255", "2001:db8:100::ffff:ffff:ffff:ffff"},
	"range-next":     {"198.51.101.0", "2001:db8:100:1::"},
	"web":            {"10.96.0.10", "fd00:10:96::10"},
	"web-ext":        {"172.16.0.10", "fd00:172:16::10"},
	"empty":          {"10.96.0.20", "fd00:10:96::20"},
	"local":          {"10.96.0.30", "fd00:10:96::30"},
	"local-ext":      {"172.16.0.30", "fd00:172:16::30"},
	"localep":        {"10.96.0.40", "fd00:10:96::40"},
	"localep-lb":     {"172.16.0.40", "fd00:172:16::40"},
	"ranged":         {"10.96.0.50", "fd00:10:96::50"},
	"node-ranged":    {"10.96.0.51", "fd00:10:96::51"},
	"ranged-lb":      {"172.16.0.50", "fd00:172:16::50"},
	"node-ranged-lb": {"172.16.0.51", "fd00:172:16::51"}, // ranged, the node's address in a range
	"dns":            {"10.96.0.60", "fd00:10:96::60"},
	"no-cidr":        {"10.96.0.70", "fd00:10:96::70"}, // a ClusterIP of a family without a cluster CIDR
}

// onNode are the hosts whose endpoints run on this node (Local).
var onNode = map[string]bool{"pod-a": true, "pod-b": true, "node": true}

var (
	clusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")}
	sourceRanges = [2]netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8:100::/64")}
)

const (
	v4 = 0
	v6 = 1
)

func famName(fam int) string { return [2]string{"v4", "v6"}[fam] }

// addr resolves a host name in a family.
func addr(t testing.TB, name string, fam int) netip.Addr {
	t.Helper()
	h, ok := hosts[name]
	if !ok {
		t.Fatalf("unknown host %q", name)
	}
	return netip.MustParseAddr(h[fam])
}

// addrPort resolves "name:port" (or "name", port 0).
func addrPort(t testing.TB, s string, fam int) netip.AddrPort {
	t.Helper()
	name, port, ok := strings.Cut(s, ":")
	var p uint64
	if ok {
		var err error
		if p, err = strconv.ParseUint(port, 10, 16); err != nil {
			t.Fatalf("port of %q: %v", s, err)
		}
	}
	return netip.AddrPortFrom(addr(t, name, fam), uint16(p))
}

// nameOf renames addresses back to host names in summaries.
func nameOf(a netip.Addr) string {
	for name, h := range hosts {
		if h[0] == a.String() || netip.MustParseAddr(h[1]) == a {
			return name
		}
	}
	return a.String()
}

// vsSpec is one virtual server of the test plan, in both families.
type vsSpec struct {
	service    string // namespace/name
	kind       policy.Kind
	at         string // "host:port"
	proto      policy.Protocol
	masq       policy.Masquerade
	local      bool               // eTP=Local
	dests      []string           // "host:port"
	whenEmpty  policy.EmptyAction // with no dests
	via        string             // InternalVia, "host:port"
	ranged     bool               // loadBalancerSourceRanges: sourceRanges
	rangedNode bool               // loadBalancerSourceRanges: sourceRanges and the node's address
	noTrack    bool
	onNode     bool // an external address that is a node's: OnNodeAddress
}

// specs is the test plan: one or more services for every rule of
// nft/README.md's chains table (see README.md here).
var specs = []vsSpec{
	{service: "default/web", kind: policy.KindClusterIP, at: "web:80", masq: policy.MasqueradeOffCluster, dests: []string{"pod-a:8080", "pod-c:8080"}},
	{service: "default/web", kind: policy.KindNodePort, at: "node:30080", masq: policy.MasqueradeAlways, dests: []string{"pod-a:8080", "pod-c:8080"}},
	{service: "default/web", kind: policy.KindExternalIP, at: "web-ext:80", masq: policy.MasqueradeAlways, dests: []string{"pod-a:8080", "pod-c:8080"}},
	{service: "default/empty", kind: policy.KindClusterIP, at: "empty:80", masq: policy.MasqueradeOffCluster, whenEmpty: policy.EmptyReject},
	{service: "default/empty", kind: policy.KindClusterIP, at: "empty:53", proto: policy.ProtocolUDP, masq: policy.MasqueradeOffCluster, whenEmpty: policy.EmptyReject},
	// eTP=Local, no endpoint on this node: Drop for external clients,
	// the ClusterIP for pods and the host.
	{service: "default/local", kind: policy.KindClusterIP, at: "local:80", masq: policy.MasqueradeOffCluster, dests: []string{"pod-c:8080"}},
	{service: "default/local", kind: policy.KindExternalIP, at: "local-ext:80", masq: policy.MasqueradeNever, local: true, whenEmpty: policy.EmptyDrop, via: "local:80"},
	{service: "default/local", kind: policy.KindNodePort, at: "node:30030", masq: policy.MasqueradeNever, local: true, whenEmpty: policy.EmptyDrop, via: "local:80"},
	// eTP=Local with an endpoint on this node.
	{service: "default/localep", kind: policy.KindClusterIP, at: "localep:80", masq: policy.MasqueradeOffCluster, dests: []string{"pod-a:8080", "pod-c:8080"}},
	{service: "default/localep", kind: policy.KindLoadBalancer, at: "localep-lb:80", masq: policy.MasqueradeNever, local: true, dests: []string{"pod-a:8080"}, via: "localep:80"},
	{service: "default/ranged", kind: policy.KindClusterIP, at: "ranged:443", masq: policy.MasqueradeOffCluster, dests: []string{"pod-c:8443"}},
	{service: "default/ranged", kind: policy.KindLoadBalancer, at: "ranged-lb:443", masq: policy.MasqueradeAlways, dests: []string{"pod-c:8443"}, ranged: true},
	{service: "default/node-ranged", kind: policy.KindClusterIP, at: "node-ranged:443", masq: policy.MasqueradeOffCluster, dests: []string{"pod-c:8443"}},
	{service: "default/node-ranged", kind: policy.KindLoadBalancer, at: "node-ranged-lb:443", masq: policy.MasqueradeAlways, dests: []string{"pod-c:8443"}, rangedNode: true},
	// An external IP that is the node's address: served unbound, as kube-proxy.
	{service: "ingress/nginx", kind: policy.KindExternalIP, at: "node:8443", masq: policy.MasqueradeAlways, dests: []string{"pod-c:8443"}, onNode: true},
	// A ClusterIP of a family without a cluster CIDR: Never, as the
	// engine decides without --cluster-cidr.
	{service: "default/no-cidr", kind: policy.KindClusterIP, at: "no-cidr:80", masq: policy.MasqueradeNever, dests: []string{"pod-c:8080"}},
	// NOTRACK, with a host-network destination (the node's address).
	{service: "kube-system/dns", kind: policy.KindClusterIP, at: "dns:53", proto: policy.ProtocolUDP, masq: policy.MasqueradeOffCluster, noTrack: true,
		dests: []string{"node:5353", "pod-a:5353", "pod-c:5353"}},
}

// testPlan builds the plan of specs in both families. It is the only
// code that fills policy.VirtualServer: when the plan types change shape,
// only it changes.
func testPlan(t testing.TB) policy.Plan {
	var p policy.Plan
	for fam := range 2 {
		for _, s := range specs {
			at := addrPort(t, s.at, fam)
			ns, name, _ := strings.Cut(s.service, "/")
			vs := policy.VirtualServer{Service: policy.ServiceKey{Namespace: ns, Name: name}, Kind: s.kind, Address: at.Addr(), Port: at.Port(),
				Protocol: s.proto, Scheduler: "rr", TrafficPolicy: policy.PolicyCluster, NoTrack: s.noTrack,
				Masquerade: s.masq, OnNodeAddress: s.onNode, Destinations: []policy.Destination{}}
			if vs.Protocol == "" {
				vs.Protocol = policy.ProtocolTCP
			}
			if s.local {
				vs.TrafficPolicy = policy.PolicyLocal
			}
			for _, d := range s.dests {
				dap := addrPort(t, d, fam)
				name, _, _ := strings.Cut(d, ":")
				vs.Destinations = append(vs.Destinations, policy.Destination{Address: dap.Addr(), Port: dap.Port(), Weight: 1, Local: onNode[name]})
			}
			if len(s.dests) == 0 {
				vs.WhenEmpty = s.whenEmpty
			}
			if s.via != "" {
				vs.InternalVia = addrPort(t, s.via, fam)
			}
			if s.ranged {
				vs.SourceRanges = []netip.Prefix{sourceRanges[fam]}
			}
			if s.rangedNode { // as the engine decides when a range holds the node's primary IP
				node := addr(t, "node", fam)
				vs.SourceRanges = []netip.Prefix{sourceRanges[fam], netip.PrefixFrom(node, node.BitLen())}
				vs.NodeInSourceRanges = true
			}
			p.VirtualServers = append(p.VirtualServers, vs)
		}
	}
	policy.SortVirtualServers(p.VirtualServers)
	return p
}

// testbed is the test plan programmed with the production writers over
// their fakes, as the proxy does (Resync).
type testbed struct {
	tables *nft.Fake
	kernel *ipvs.FakeKernel
	node   packettrace.Node
}

// newTestbed programs the plan. The node's local addresses are those of
// its links: eth0 (node), cni0 (bridge) and kube-ipvs0 (what the IPVS
// writer bound).
func newTestbed(t testing.TB) testbed { return newTestbedFor(t, byClusterCIDR) }

// newTestbedFor programs the plan with the table telling local pods as
// mode does, the node having mode's routes.
func newTestbedFor(t testing.TB, mode localMode) testbed {
	t.Helper()
	plan := testPlan(t)
	tables := nft.NewFake()
	cfg := nft.Config{ClusterCIDRs: clusterCIDRs, PodInterface: mode.podInterface, PodInterfacePrefix: mode.prefix}
	if err := nft.New(cfg, tables).Resync(plan); err != nil {
		t.Fatalf("nft Resync: %v", err)
	}
	kernel, links := ipvs.NewFakeKernel(), ipvs.NewFakeLinks()
	for link, host := range map[string]string{"eth0": "node", "cni0": "bridge"} {
		if err := links.AddLink(link, "veth"); err != nil {
			t.Fatal(err)
		}
		for fam, bits := range [2]int{24, 64} {
			if err := links.AddAddr(link, netip.PrefixFrom(addr(t, host, fam), bits)); err != nil {
				t.Fatal(err)
			}
		}
	}
	w := ipvs.New(ipvs.Config{}, kernel, links, ipvs.NewFakeSysctls())
	defer w.Close()
	if err := w.Resync(plan); err != nil {
		t.Fatalf("ipvs Resync: %v", err)
	}
	var node packettrace.Node
	for _, link := range []string{"eth0", "cni0", ipvs.DefaultInterface} {
		ps, err := links.Addrs(link)
		if err != nil {
			t.Fatalf("addresses of %s: %v", link, err)
		}
		for _, p := range ps {
			node.Local = append(node.Local, p.Addr())
		}
	}
	node.Routes = mode.routes(t)
	return testbed{tables: tables, kernel: kernel, node: node}
}

// newTracer snapshots a new testbed.
func newTracer(t testing.TB) *packettrace.Tracer { return newTracerFor(t, byClusterCIDR) }

// newTracerFor snapshots a new testbed of mode.
func newTracerFor(t testing.TB, mode localMode) *packettrace.Tracer {
	t.Helper()
	tb := newTestbedFor(t, mode)
	tr, err := packettrace.New(tb.tables, tb.kernel, tb.node)
	if err != nil {
		t.Fatalf("packettrace.New: %v", err)
	}
	return tr
}
