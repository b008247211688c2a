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
