package policy

import (
	"net/netip"
	"testing"
)

// TestDataPlaneDecisions pins what the plan tells the kernel writers:
// masquerade mode, the action for empty virtual servers, LB source
// ranges and NOTRACK.
func TestDataPlaneDecisions(t *testing.T) {
	external := func(s *Service) {
		s.Ports[0].NodePort = 30080
		s.LoadBalancerIPs = []netip.Addr{ip("198.51.100.9")}
	}
	etpLocal := func(s *Service) { s.ExternalLocal = true }
	tests := []struct {
		name      string
		cfg       Config
		svc       *Service
		eps       []Endpoint
		kind      Kind
		wantMasq  Masquerade
		wantEmpty EmptyAction
	}{
		{name: "ClusterIP: off-cluster sources masquerade when --cluster-cidr has the family",
			cfg: Config{ClusterCIDRs: []string{"10.244.0.0/16"}}, svc: svc("web"), eps: []Endpoint{ep("10.0.0.1")},
			kind: KindClusterIP, wantMasq: MasqueradeOffCluster},
		{name: "ClusterIP: without --cluster-cidr of the family nothing masquerades",
			cfg: Config{ClusterCIDRs: []string{"fd00:244::/56"}}, svc: svc("web"), eps: []Endpoint{ep("10.0.0.1")},
			kind: KindClusterIP, wantMasq: MasqueradeNever},
		{name: "ClusterIP: detecting local pods by interface masquerades off-cluster sources of every family, without --cluster-cidr",
			cfg: Config{LocalByInterface: true}, svc: svc("web"), eps: []Endpoint{ep("10.0.0.1")},
			kind: KindClusterIP, wantMasq: MasqueradeOffCluster},
		{name: "ClusterIP: detecting local pods by interface ignores a --cluster-cidr of the other family",
			cfg: Config{LocalByInterface: true, ClusterCIDRs: []string{"fd00:244::/56"}}, svc: svc("web"), eps: []Endpoint{ep("10.0.0.1")},
			kind: KindClusterIP, wantMasq: MasqueradeOffCluster},
		{name: "ClusterIP: --masquerade-all masquerades everything",
			cfg: Config{MasqueradeAll: true}, svc: svc("web"), eps: []Endpoint{ep("10.0.0.1")},
			kind: KindClusterIP, wantMasq: MasqueradeAlways},
		{name: "external under eTP=Cluster always masquerades",
			svc: svc("web", external), eps: []Endpoint{ep("10.0.0.1")}, kind: KindNodePort, wantMasq: MasqueradeAlways},
		{name: "external under eTP=Local never masquerades, keeping the client IP",
			svc: svc("web", external, etpLocal), eps: []Endpoint{ep("10.0.0.1", local())}, kind: KindLoadBalancer, wantMasq: MasqueradeNever},
		{name: "NOTRACK keeps the masquerade of tracked (host and external) clients: external",
			cfg: Config{MasqueradeAll: true}, svc: svc("web", external, annotate(AnnotationNoTrack, "true")), eps: []Endpoint{ep("10.0.0.1")},
			kind: KindNodePort, wantMasq: MasqueradeAlways},
		{name: "NOTRACK keeps the masquerade of tracked (host and external) clients: ClusterIP",
			cfg: Config{ClusterCIDRs: []string{"10.244.0.0/16"}}, svc: svc("web", annotate(AnnotationNoTrack, "true")), eps: []Endpoint{ep("10.0.0.1")},
			kind: KindClusterIP, wantMasq: MasqueradeOffCluster},
		{name: "a service without endpoints rejects",
			svc: svc("web"), kind: KindClusterIP, wantMasq: MasqueradeNever, wantEmpty: EmptyReject},
		{name: "a service whose endpoints are all unready rejects",
			svc: svc("web"), eps: []Endpoint{ep("10.0.0.1", notReady)}, kind: KindClusterIP, wantMasq: MasqueradeNever, wantEmpty: EmptyReject},
		{name: "eTP=Local without local endpoints drops while endpoints exist elsewhere",
			svc: svc("web", external, etpLocal), eps: []Endpoint{ep("10.0.0.1")}, kind: KindNodePort, wantMasq: MasqueradeNever, wantEmpty: EmptyDrop},
		{name: "eTP=Local without any endpoint rejects",
			svc: svc("web", external, etpLocal), kind: KindNodePort, wantMasq: MasqueradeNever, wantEmpty: EmptyReject},
		{name: "iTP=Local without local endpoints drops while endpoints exist elsewhere",
			svc: svc("web", internalLocal), eps: []Endpoint{ep("10.0.0.1", terminating)}, kind: KindClusterIP, wantMasq: MasqueradeNever, wantEmpty: EmptyDrop},
		{name: "topology keys matching no endpoint reject",
			svc: svc("web", annotate(AnnotationTopologyKeys, "kubernetes.io/hostname")), eps: []Endpoint{ep("10.0.0.1")},
			kind: KindClusterIP, wantMasq: MasqueradeNever, wantEmpty: EmptyReject},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{cfg: tc.cfg, svcs: []*Service{tc.svc}, slices: []*EndpointSlice{slice("web", "web-1", tc.eps...)}})
			plan, _ := e.Compute()
			vs := vsOf(t, plan, tc.kind)
			if vs.Masquerade != tc.wantMasq || vs.WhenEmpty != tc.wantEmpty {
				t.Errorf("masquerade %q whenEmpty %q, want %q %q (reason %q)", vs.Masquerade, vs.WhenEmpty, tc.wantMasq, tc.wantEmpty, vs.Reason)
			}
		})
	}
}

func TestSourceRangesApplyToLoadBalancersOfTheirFamily(t *testing.T) {
	s := svc("web", func(s *Service) {
		s.ClusterIPs = append(s.ClusterIPs, ip("fd00::1"))
		s.LoadBalancerIPs = []netip.Addr{ip("198.51.100.9"), ip("2001:db8::9")}
		s.ExternalIPs = []netip.Addr{ip("203.0.113.7")}
		s.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	e, _ := newEngine(t, world{svcs: []*Service{s}})
	plan, _ := e.Compute()
	for _, vs := range plan.VirtualServers {
		want := 0
		if vs.Kind == KindLoadBalancer && vs.Address.Is4() {
			want = 1
		}
		if len(vs.SourceRanges) != want {
			t.Errorf("%s: source ranges %v, want %d (an IPv6 LB with only IPv4 ranges allows any source)", vsLine(vs), vs.SourceRanges, want)
		}
	}
}

// The node's own connections to a load balancer with source ranges pass
// only when a range holds the node's primary IP of the load balancer's
// family, as kube-proxy's IPVS mode decides: its first InternalIP of
// that family, else its first ExternalIP; another address of the node
// does not count.
func TestNodeInSourceRangesTakesTheNodesPrimaryIP(t *testing.T) {
	lb := func(ranges ...string) *Service {
		return svc("web", func(s *Service) {
			s.ClusterIPs = append(s.ClusterIPs, ip("fd00::1"))
			s.LoadBalancerIPs = []netip.Addr{ip("198.51.100.9"), ip("2001:db8::9")}
			for _, r := range ranges {
				s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges, netip.MustParsePrefix(r))
			}
		})
	}
	external := func(n *Node, addrs ...string) *Node {
		for _, a := range addrs {
			n.ExternalIPs = append(n.ExternalIPs, ip(a))
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		node     *Node
		svc      *Service
		v4, v6   bool // NodeInSourceRanges of the IPv4 and the IPv6 load balancer
		noRanges bool // the IPv6 load balancer has no range of its family
		bind     string
	}{
		{name: "the primary IPv4 address in a range", node: node(thisNode, "", "192.168.0.1"), svc: lb("192.168.0.0/24", "2001:db8:1::/64"), v4: true},
		{name: "the primary IPv4 address outside every range", node: node(thisNode, "", "192.168.0.1"), svc: lb("10.0.0.0/8", "2001:db8:1::/64")},
		{name: "a second InternalIP in a range does not count", node: node(thisNode, "", "192.168.0.1", "10.0.0.5"), svc: lb("10.0.0.0/8", "2001:db8:1::/64")},
		{name: "each family takes its own primary address", node: node(thisNode, "", "192.168.0.1", "2001:db8:1::5"), svc: lb("192.168.0.0/24", "2001:db8:1::/64"), v4: true, v6: true},
		{name: "without an InternalIP of the family, the first ExternalIP", node: external(node(thisNode, "", "2001:db8:1::5"), "203.0.113.4", "192.168.0.1"), svc: lb("203.0.113.0/24", "192.168.0.0/24", "2001:db8:1::/64"), v4: true, v6: true},
		{name: "a load balancer without ranges of its family has no such flag", node: node(thisNode, "", "192.168.0.1", "2001:db8:1::5"), svc: lb("192.168.0.0/24"), v4: true, noRanges: true},
		{name: "no Node for this host: no primary IP", node: node("other", "", "192.168.0.1"), svc: lb("192.168.0.0/24", "2001:db8:1::/64")},
		{name: "--bind-address is the primary IP of its family", bind: "10.0.0.5", node: node(thisNode, "", "192.168.0.1", "2001:db8:1::5"),
			svc: lb("10.0.0.0/8", "2001:db8:1::/64"), v4: true, v6: true},
		{name: "--bind-address takes the Node's primary IP's place", bind: "10.0.0.5", node: node(thisNode, "", "192.168.0.1"),
			svc: lb("192.168.0.0/24", "2001:db8:1::/64")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg Config
			if tc.bind != "" {
				cfg.BindAddress = ip(tc.bind)
			}
			e, _ := newEngine(t, world{cfg: cfg, nodes: []*Node{tc.node}, svcs: []*Service{tc.svc}})
			plan, _ := e.Compute()
			seen := 0
			for _, vs := range plan.VirtualServers {
				if vs.Kind != KindLoadBalancer {
					if vs.NodeInSourceRanges {
						t.Errorf("%s: NodeInSourceRanges on a %s", vsLine(vs), vs.Kind)
					}
					continue
				}
				seen++
				want := tc.v6
				if vs.Address.Is4() {
					want = tc.v4
				}
				if vs.NodeInSourceRanges != want {
					t.Errorf("%s: NodeInSourceRanges %v, want %v (ranges %v)", vsLine(vs), vs.NodeInSourceRanges, want, vs.SourceRanges)
				}
				if tc.noRanges && vs.Address.Is6() && len(vs.SourceRanges) != 0 {
					t.Errorf("%s: source ranges %v, want none", vsLine(vs), vs.SourceRanges)
				}
			}
			if seen != 2 {
				t.Fatalf("%d load balancer virtual servers, want 2", seen)
			}
		})
	}
}
