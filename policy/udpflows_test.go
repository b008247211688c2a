package policy

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// udpSvc is default/NAME on 10.96.0.53 with UDP port dns 53, NodePort
// 30053, external IP 203.0.113.53 and load-balancer IP 198.51.100.53.
func udpSvc(name string) *Service {
	return &Service{Key: ServiceKey{"default", name}, ClusterIPs: []netip.Addr{ip("10.96.0.53")},
		ExternalIPs: []netip.Addr{ip("203.0.113.53")}, LoadBalancerIPs: []netip.Addr{ip("198.51.100.53")},
		Ports: []ServicePort{{Name: "dns", Protocol: ProtocolUDP, Port: 53, NodePort: 30053},
			{Name: "http", Protocol: ProtocolTCP, Port: 80, NodePort: 30080}}}
}

// udpSlice is default/SERVICE's IPv4 slice with ports dns UDP 5353 and
// http TCP 8080.
func udpSlice(service string, eps ...Endpoint) *EndpointSlice {
	return &EndpointSlice{Name: service + "-1", Service: ServiceKey{"default", service}, IPv4: true,
		Ports:     []EndpointPort{{Name: "dns", Protocol: ProtocolUDP, Port: 5353}, {Name: "http", Protocol: ProtocolTCP, Port: 8080}},
		Endpoints: eps}
}

// TestUDPServingListsEveryUDPFrontendWithItsServingEndpoints: the
// ClusterIP, the NodePort on each of the node's addresses, the external
// and the load-balancer IP, each with the port's serving endpoints
// (ready or serving-terminating, whatever the traffic policy chose),
// never a TCP virtual server and never an endpoint that is not serving.
func TestUDPServingListsEveryUDPFrontendWithItsServingEndpoints(t *testing.T) {
	s := udpSvc("dns")
	s.ExternalLocal = true // picks local endpoints only; the flows' rules keep every serving one
	e, _ := newEngine(t, world{
		nodes: []*Node{node(thisNode, thisZone, "192.168.0.1", "192.168.1.1")},
		svcs:  []*Service{s},
		slices: []*EndpointSlice{udpSlice("dns",
			ep("10.244.1.1", local()), ep("10.244.2.2", terminating), ep("10.244.3.3", notReady), ep("10.244.4.4", terminatingDead))},
	})
	sp, _ := e.ComputeService(s.Key)
	serving := []netip.AddrPort{ap("10.244.1.1:5353"), ap("10.244.2.2:5353")}
	var want []UDPServing
	for _, f := range []string{"10.96.0.53:53", "192.168.0.1:30053", "192.168.1.1:30053", "198.51.100.53:53", "203.0.113.53:53"} {
		want = append(want, UDPServing{Frontend: ap(f), Endpoints: serving})
	}
	got := slices.Clone(sp.UDPServing)
	slices.SortFunc(got, func(a, b UDPServing) int { return a.Frontend.Compare(b.Frontend) })
	if d := cmp.Diff(want, got, equateAddr); d != "" {
		t.Errorf("UDPServing (-want +got):\n%s", d)
	}
}

// TestUDPServingLeavesOutAPortWithoutServingEndpoints: as kube-proxy, a
// port none of whose endpoints serves keeps its flows (nothing could take
// them over), so it has no rules.
func TestUDPServingLeavesOutAPortWithoutServingEndpoints(t *testing.T) {
	s := udpSvc("dns")
	e, _ := newEngine(t, world{svcs: []*Service{s},
		slices: []*EndpointSlice{udpSlice("dns", ep("10.244.3.3", notReady), ep("10.244.4.4", terminatingDead))}})
	if sp, _ := e.ComputeService(s.Key); len(sp.UDPServing) != 0 {
		t.Errorf("UDPServing = %v, want none", sp.UDPServing)
	}
}

// TestUDPServingLeavesOutVirtualServersAnotherServiceOwns: a UDP virtual
// server the older service owns is in its plan only; the younger
// service's rules never name it, so its flows follow the owner's.
func TestUDPServingLeavesOutVirtualServersAnotherServiceOwns(t *testing.T) {
	older, younger := udpSvc("older"), udpSvc("younger")
	younger.Created = older.Created.Add(1)
	younger.ClusterIPs = []netip.Addr{ip("10.96.0.54")} // external and LB IPs shared
	e, _ := newEngine(t, world{svcs: []*Service{older, younger},
		slices: []*EndpointSlice{udpSlice("older", ep("10.244.1.1")), udpSlice("younger", ep("10.244.9.9"))}})
	sp, _ := e.ComputeService(younger.Key)
	var frontends []string
	for _, u := range sp.UDPServing {
		frontends = append(frontends, u.Frontend.String())
	}
	slices.Sort(frontends)
	if want := []string{"10.96.0.54:53"}; !slices.Equal(frontends, want) {
		t.Errorf("younger's UDP frontends = %v, want %v", frontends, want)
	}
}

// TestStaleUDPFlowRules are the reconciler's rules, flow by flow.
func TestStaleUDPFlowRules(t *testing.T) {
	serving := []netip.AddrPort{ap("10.244.1.1:5353"), ap("10.244.2.2:5353")}
	other := []netip.AddrPort{ap("10.244.3.3:5353")}
	rules := NewStaleUDPFlows(maps.Values(map[string][]UDPServing{
		"dns":   {{Frontend: ap("10.96.0.53:53"), Endpoints: serving}, {Frontend: ap("192.168.0.1:30053"), Endpoints: serving}},
		"v6":    {{Frontend: ap("[fd00:96::53]:53"), Endpoints: []netip.AddrPort{ap("[fd00:244::1]:5353")}}},
		"other": {{Frontend: ap("10.96.0.99:53"), Endpoints: other}},
	}))
	for _, tc := range []struct {
		name              string
		origDst, replySrc string
		stale             bool
	}{
		{"a flow replied by a serving endpoint stays", "10.96.0.53:53", "10.244.1.1:5353", false},
		{"a flow replied by a serving-terminating endpoint stays", "10.96.0.53:53", "10.244.2.2:5353", false},
		{"a flow replied by an endpoint that no longer serves goes", "10.96.0.53:53", "10.244.3.3:5353", true},
		{"a flow replied by a serving endpoint's address on another port goes", "10.96.0.53:53", "10.244.1.1:5354", true},
		{"a flow translated to nothing (sent while the port had no endpoint) goes", "10.96.0.53:53", "10.96.0.53:53", true},
		{"a NodePort flow on the node's address is matched by port", "192.168.0.1:30053", "10.244.3.3:5353", true},
		{"a NodePort flow replied by a serving endpoint stays", "192.168.0.1:30053", "10.244.2.2:5353", false},
		{"a flow to the NodePort on another address is not ours", "192.168.9.9:30053", "10.244.3.3:5353", false},
		{"a flow to the service address on another port is not ours", "10.96.0.53:54", "10.244.3.3:5353", false},
		{"a flow to another address is never touched", "10.244.3.3:5353", "10.244.3.3:5353", false},
		{"another service's flow keeps its own endpoints", "10.96.0.99:53", "10.244.3.3:5353", false},
		{"another service's flow replied by this one's endpoint goes", "10.96.0.99:53", "10.244.1.1:5353", true},
		{"an IPv4-mapped flow is matched as IPv4", "[::ffff:10.96.0.53]:53", "[::ffff:10.244.3.3]:5353", true},
		{"an IPv6 flow replied by a serving endpoint stays", "[fd00:96::53]:53", "[fd00:244::1]:5353", false},
		{"an IPv6 flow replied by another endpoint goes", "[fd00:96::53]:53", "[fd00:244::2]:5353", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules.Stale(UDPFlow{OrigDst: ap(tc.origDst), ReplySrc: ap(tc.replySrc)}); got != tc.stale {
				t.Errorf("Stale(%s → %s) = %v, want %v", tc.origDst, tc.replySrc, got, tc.stale)
			}
		})
	}
	if v4, v6 := rules.Families(); !v4 || !v6 {
		t.Errorf("Families() = %v, %v; want both", v4, v6)
	}
}

// TestStaleUDPFlowsWithoutRulesFindsNothing: the zero value, and the
// rules of no service, read no family and call no flow stale.
func TestStaleUDPFlowsWithoutRulesFindsNothing(t *testing.T) {
	for _, rules := range []StaleUDPFlows{{}, NewStaleUDPFlows(slices.Values([][]UDPServing{nil}))} {
		if v4, v6 := rules.Families(); v4 || v6 {
			t.Errorf("Families() = %v, %v; want neither", v4, v6)
		}
		if rules.Stale(UDPFlow{OrigDst: ap("10.96.0.53:53"), ReplySrc: ap("10.244.3.3:5353")}) {
			t.Error("a flow is stale without rules")
		}
	}
}

// TestStaleUDPFlowsSetServiceChangesOneServicesRules: the rules kept
// across syncs change one service at a time, as a new index of every
// service would have them: a service's old frontends go, its new ones
// come, another service's stay, and a family is read while any of its
// frontends is left.
func TestStaleUDPFlowsSetServiceChangesOneServicesRules(t *testing.T) {
	a, b := ServiceKey{"default", "a"}, ServiceKey{"default", "b"}
	eps1 := []netip.AddrPort{ap("10.244.1.1:5353")}
	eps2 := []netip.AddrPort{ap("10.244.2.2:5353")}
	aOld := []UDPServing{{Frontend: ap("10.96.0.53:53"), Endpoints: eps1}, {Frontend: ap("[fd00:96::53]:53"), Endpoints: eps1}}
	aNew := []UDPServing{{Frontend: ap("10.96.0.54:53"), Endpoints: eps2}}
	bRules := []UDPServing{{Frontend: ap("10.96.0.99:53"), Endpoints: eps1}}
	type set struct {
		svc      ServiceKey
		old, now []UDPServing
	}
	for _, tc := range []struct {
		name   string
		sets   []set
		stale  map[string]bool // "origDst>replySrc" → stale
		v4, v6 bool
	}{
		{name: "a service's new rules replace its old ones",
			sets: []set{{a, nil, aOld}, {b, nil, bRules}, {a, aOld, aNew}},
			stale: map[string]bool{
				"10.96.0.53:53>10.244.9.9:5353":   false, // its old frontend is no longer ours
				"[fd00:96::53]:53>[fd00::9]:5353": false,
				"10.96.0.54:53>10.244.1.1:5353":   true, // its new frontend has its new endpoints
				"10.96.0.54:53>10.244.2.2:5353":   false,
				"10.96.0.99:53>10.244.2.2:5353":   true, // the other service's are unchanged
				"10.96.0.99:53>10.244.1.1:5353":   false,
			},
			v4: true},
		{name: "a service without rules any more leaves none",
			sets:  []set{{a, nil, aOld}, {a, aOld, nil}},
			stale: map[string]bool{"10.96.0.53:53>10.244.9.9:5353": false}},
		{name: "a frontend another service has given since stays that service's",
			sets: []set{{a, nil, aOld}, {b, nil, []UDPServing{{Frontend: ap("10.96.0.53:53"), Endpoints: eps2}}}, {a, aOld, nil}},
			stale: map[string]bool{
				"10.96.0.53:53>10.244.1.1:5353": true,
				"10.96.0.53:53>10.244.2.2:5353": false,
			},
			v4: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rules StaleUDPFlows
			for _, s := range tc.sets {
				rules.SetService(s.svc, s.old, s.now)
			}
			for flow, want := range tc.stale {
				dst, src, _ := strings.Cut(flow, ">")
				if got := rules.Stale(UDPFlow{OrigDst: ap(dst), ReplySrc: ap(src)}); got != want {
					t.Errorf("Stale(%s → %s) = %v, want %v", dst, src, got, want)
				}
			}
			if v4, v6 := rules.Families(); v4 != tc.v4 || v6 != tc.v6 {
				t.Errorf("Families() = %v, %v; want %v, %v", v4, v6, tc.v4, tc.v6)
			}
		})
	}
}
