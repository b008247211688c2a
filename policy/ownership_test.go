package policy

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func clusterIP(a string) svcOpt { return func(s *Service) { s.ClusterIPs = []netip.Addr{ip(a)} } }

func externalIPs(a ...string) svcOpt {
	return func(s *Service) {
		for _, x := range a {
			s.ExternalIPs = append(s.ExternalIPs, ip(x))
		}
	}
}

func lbIPs(a ...string) svcOpt {
	return func(s *Service) {
		for _, x := range a {
			s.LoadBalancerIPs = append(s.LoadBalancerIPs, ip(x))
		}
	}
}

func createdAt(minute int) svcOpt {
	return func(s *Service) { s.Created = time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC) }
}

func inNamespace(ns string) svcOpt { return func(s *Service) { s.Key.Namespace = ns } }

func nodePort(p uint16) svcOpt { return func(s *Service) { s.Ports[0].NodePort = p } }

// owners maps each virtual server of the plan to its service.
func owners(p Plan) map[string]string {
	out := map[string]string{}
	for _, vs := range p.VirtualServers {
		out[vs.Key().String()] = vs.Service.String()
	}
	return out
}

// TestOwnershipRule: one owner per virtual server, the same on every
// path, by who may write the address: an apiserver-allocated ClusterIP or
// NodePort beats a load-balancer IP (a controller's), which beats an
// external IP (any editor's); then the oldest service, then
// namespace/name. An external or load-balancer IP that is any Service's
// ClusterIP is refused on every port. The loser gets a warning naming the
// winner.
func TestOwnershipRule(t *testing.T) {
	for _, tc := range []struct {
		name         string
		svcs         []*Service
		want         map[string]string
		wantWarnings string
	}{
		{
			name: "an external IP on another Service's ClusterIP is refused on every port",
			svcs: []*Service{
				svc("kube-dns", inNamespace("kube-system"), clusterIP("10.96.0.10"), createdAt(30), func(s *Service) { s.Ports[0].Port = 53 }),
				svc("grab", inNamespace("aaa"), clusterIP("10.96.0.99"), externalIPs("10.96.0.10"), createdAt(1),
					func(s *Service) {
						s.Ports = append(s.Ports, ServicePort{Name: "dns", Protocol: ProtocolTCP, Port: 53},
							ServicePort{Name: "https", Protocol: ProtocolTCP, Port: 443})
					}),
			},
			want: map[string]string{"10.96.0.10:53/TCP": "kube-system/kube-dns", "10.96.0.99:53/TCP": "aaa/grab",
				"10.96.0.99:80/TCP": "aaa/grab", "10.96.0.99:443/TCP": "aaa/grab"},
			wantWarnings: "Service aaa/grab: spec.externalIPs: 10.96.0.10 is the ClusterIP of Service kube-system/kube-dns, which owns it on every port; not served here",
		},
		{
			name: "a load-balancer IP on a ClusterIP is refused too, also the Service's own",
			svcs: []*Service{
				svc("dns", clusterIP("10.96.0.10"), func(s *Service) { s.Ports[0].Port = 53 }),
				svc("lb", clusterIP("10.96.0.11"), lbIPs("10.96.0.10", "10.96.0.11")),
			},
			want: map[string]string{"10.96.0.10:53/TCP": "default/dns", "10.96.0.11:80/TCP": "default/lb"},
			wantWarnings: "Service default/lb: status.loadBalancer.ingress.ip: 10.96.0.10 is the ClusterIP of Service default/dns, which owns it on every port; not served here\n" +
				"Service default/lb: status.loadBalancer.ingress.ip: 10.96.0.11 is the ClusterIP of Service default/lb, which owns it on every port; not served here",
		},
		{
			name: "a load-balancer IP beats an older external IP",
			svcs: []*Service{
				svc("squat", inNamespace("team-a"), clusterIP("10.96.0.1"), externalIPs("203.0.113.50"), createdAt(1)),
				svc("lb", inNamespace("team-b"), clusterIP("10.96.0.2"), lbIPs("203.0.113.50"), createdAt(2)),
			},
			want: map[string]string{"10.96.0.1:80/TCP": "team-a/squat", "10.96.0.2:80/TCP": "team-b/lb", "203.0.113.50:80/TCP": "team-b/lb"},
			wantWarnings: "Service team-a/squat: spec.ports[http]: ExternalIP virtual server 203.0.113.50:80/TCP is owned by Service team-b/lb (LoadBalancer), " +
				"which wins (a load-balancer IP, written by a controller, beats an external IP, written by any editor); not served here",
		},
		{
			name: "a NodePort beats an external IP on the same node address and port",
			svcs: []*Service{
				svc("ext", clusterIP("10.96.0.1"), externalIPs("192.168.0.1"), createdAt(1), func(s *Service) { s.Ports[0].Port = 30080 }),
				svc("np", clusterIP("10.96.0.2"), nodePort(30080), createdAt(2)),
			},
			want: map[string]string{"10.96.0.1:30080/TCP": "default/ext", "10.96.0.2:80/TCP": "default/np", "192.168.0.1:30080/TCP": "default/np"},
			wantWarnings: "Service default/ext: spec.externalIPs: 192.168.0.1 is a node's address; served on the Service's ports without binding it, the node's other ports untouched\n" +
				"Service default/ext: spec.ports[http]: ExternalIP virtual server 192.168.0.1:30080/TCP is owned by Service default/np (NodePort), " +
				"which wins (an address the apiserver allocated beats a load-balancer or external IP); not served here",
		},
		{
			name: "the oldest of two external claims wins, whatever the names",
			svcs: []*Service{
				svc("a", clusterIP("10.96.0.1"), externalIPs("203.0.113.7"), createdAt(9)),
				svc("z", clusterIP("10.96.0.2"), externalIPs("203.0.113.7"), createdAt(2)),
			},
			want: map[string]string{"10.96.0.1:80/TCP": "default/a", "10.96.0.2:80/TCP": "default/z", "203.0.113.7:80/TCP": "default/z"},
			wantWarnings: "Service default/a: spec.ports[http]: ExternalIP virtual server 203.0.113.7:80/TCP is owned by Service default/z (ExternalIP), " +
				"which wins (the oldest Service wins, then namespace/name); not served here",
		},
		{
			name: "equal kind and age: namespace/name decides",
			svcs: []*Service{
				svc("b", clusterIP("10.96.0.2"), lbIPs("203.0.113.7")),
				svc("a", clusterIP("10.96.0.1"), lbIPs("203.0.113.7")),
			},
			want: map[string]string{"10.96.0.1:80/TCP": "default/a", "10.96.0.2:80/TCP": "default/b", "203.0.113.7:80/TCP": "default/a"},
			wantWarnings: "Service default/b: spec.ports[http]: LoadBalancer virtual server 203.0.113.7:80/TCP is owned by Service default/a (LoadBalancer), " +
				"which wins (the oldest Service wins, then namespace/name); not served here",
		},
		{
			name: "other ports and protocols on a contested external address stay with their services",
			svcs: []*Service{
				svc("a", clusterIP("10.96.0.1"), externalIPs("203.0.113.7"), createdAt(1)),
				svc("b", clusterIP("10.96.0.2"), externalIPs("203.0.113.7"), createdAt(2), func(s *Service) { s.Ports[0].Port = 8080 }),
			},
			want: map[string]string{"10.96.0.1:80/TCP": "default/a", "10.96.0.2:8080/TCP": "default/b",
				"203.0.113.7:80/TCP": "default/a", "203.0.113.7:8080/TCP": "default/b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{svcs: tc.svcs})
			plan, ws := e.Compute()
			if diff := cmp.Diff(tc.want, owners(plan)); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
			if got := warningsText(ws); got != tc.wantWarnings {
				t.Errorf("warnings:\n got %s\nwant %s", got, tc.wantWarnings)
			}
			// The incremental path agrees: each service's own plan holds
			// exactly the virtual servers the full plan gives it.
			for _, s := range tc.svcs {
				sp, _ := e.ComputeService(s.Key)
				for _, vs := range sp.VirtualServers {
					if tc.want[vs.Key().String()] != s.Key.String() {
						t.Errorf("ComputeService(%s) holds %s, owned by %s", s.Key, vs.Key(), tc.want[vs.Key().String()])
					}
				}
			}
		})
	}
}

// TestOwnershipMovesWithTheOwner: when the owner goes or stops claiming,
// the next claimant is reported by Reassigned and its plan takes the
// virtual server; when an older claimant arrives, the previous owner is
// reported and loses it.
func TestOwnershipMovesWithTheOwner(t *testing.T) {
	a := svc("a", clusterIP("10.96.0.1"), externalIPs("203.0.113.7"), createdAt(1))
	b := svc("b", clusterIP("10.96.0.2"), externalIPs("203.0.113.7"), createdAt(2))
	e, _ := newEngine(t, world{svcs: []*Service{a, b}})
	e.Reassigned() // drain the load
	external := VirtualServerKey{Address: ip("203.0.113.7"), Protocol: ProtocolTCP, Port: 80}
	holds := func(k ServiceKey) bool {
		sp, _ := e.ComputeService(k)
		return slices.ContainsFunc(sp.VirtualServers, func(vs VirtualServer) bool { return vs.Key() == external })
	}

	e.DeleteService(a.Key)
	if got := e.Reassigned(); !cmp.Equal(got, []ServiceKey{b.Key}) {
		t.Errorf("deleting the owner reassigns %v, want [default/b]", got)
	}
	if !holds(b.Key) {
		t.Errorf("default/b does not hold %s after the owner went", external)
	}

	e.UpsertService(a) // older: takes it back
	if got := e.Reassigned(); !cmp.Equal(got, []ServiceKey{b.Key}) {
		t.Errorf("an older claimant arriving reassigns %v, want [default/b]", got)
	}
	if !holds(a.Key) || holds(b.Key) {
		t.Errorf("after a returns: a holds %v, b holds %v; want true, false", holds(a.Key), holds(b.Key))
	}

	a2 := svc("a", clusterIP("10.96.0.1"), createdAt(1)) // drops its external IP
	e.UpsertService(a2)
	if got := e.Reassigned(); !cmp.Equal(got, []ServiceKey{b.Key}) {
		t.Errorf("the owner dropping its claim reassigns %v, want [default/b]", got)
	}
	if !holds(b.Key) {
		t.Errorf("default/b does not hold %s after a dropped it", external)
	}

	e.UpsertService(svc("c", clusterIP("10.96.0.3"), createdAt(0)))
	if got := e.Reassigned(); len(got) != 0 {
		t.Errorf("an unrelated service reassigns %v, want none", got)
	}
}

// TestReleaseBeforeClaimInOneBatch: a Service deleted and another created
// with the same ClusterIP before one sync: the new one owns it at once.
func TestReleaseBeforeClaimInOneBatch(t *testing.T) {
	old := svc("old", clusterIP("10.96.0.50"), createdAt(1))
	e, _ := newEngine(t, world{svcs: []*Service{old}})
	e.UpsertService(svc("new", clusterIP("10.96.0.50"), createdAt(5))) // the informer may deliver the add first
	e.DeleteService(old.Key)
	sp, _ := e.ComputeService(ServiceKey{"default", "new"})
	if len(sp.VirtualServers) != 1 || sp.VirtualServers[0].Address != ip("10.96.0.50") {
		t.Fatalf("new service's plan %v, want its ClusterIP 10.96.0.50", planLines(Plan{VirtualServers: sp.VirtualServers}))
	}
	if got := e.Reassigned(); !cmp.Equal(got, []ServiceKey{{"default", "new"}}) {
		t.Errorf("Reassigned %v, want [default/new]", got)
	}
}

// TestExternalAddressesOnNodeAddresses: an external or load-balancer IP
// that is this node's address or another Node's (their InternalIP and
// ExternalIP), or an address of this host's interfaces, is served as
// kube-proxy's IPVS mode serves it: on the Service's ports, not bound
// (OnNodeAddress), with a warning naming a Node's address; with
// RefuseNodeAddresses, a Node's address is not served at all. The
// service's other addresses are served and bound.
func TestExternalAddressesOnNodeAddresses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		want  []string // kind address bound|unbound
		wantW string
	}{
		{
			name: "served unbound, as kube-proxy",
			want: []string{"ClusterIP 10.96.0.1:80/TCP bound", "ExternalIP 192.168.0.1:80/TCP unbound", "ExternalIP 192.168.0.2:80/TCP unbound",
				"LoadBalancer 192.168.0.9:80/TCP unbound", "LoadBalancer 198.51.100.1:80/TCP bound", "ExternalIP 203.0.113.7:80/TCP bound"},
			wantW: "Service default/web: spec.externalIPs: 192.168.0.1 is a node's address; served on the Service's ports without binding it, the node's other ports untouched\n" +
				"Service default/web: spec.externalIPs: 192.168.0.2 is a node's address; served on the Service's ports without binding it, the node's other ports untouched",
		},
		{
			name: "refused on request",
			cfg:  Config{RefuseNodeAddresses: true},
			want: []string{"ClusterIP 10.96.0.1:80/TCP bound", "LoadBalancer 192.168.0.9:80/TCP unbound", "LoadBalancer 198.51.100.1:80/TCP bound",
				"ExternalIP 203.0.113.7:80/TCP bound"},
			wantW: "Service default/web: spec.externalIPs: 192.168.0.1 is a node's address; not served, so that the node keeps it\n" +
				"Service default/web: spec.externalIPs: 192.168.0.2 is a node's address; not served, so that the node keeps it",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := svc("web", externalIPs("192.168.0.1", "203.0.113.7", "192.168.0.2"), lbIPs("192.168.0.9", "198.51.100.1"))
			e, _ := newEngine(t, world{cfg: tc.cfg,
				nodes: []*Node{node(thisNode, thisZone, "192.168.0.1"), node("node-b", "zone-b", "192.168.0.2")},
				svcs:  []*Service{s},
			})
			e.SetLocalAddresses([]netip.Addr{ip("192.168.0.1"), ip("192.168.0.9")}) // .9: a VIP another agent put there
			plan, ws := e.Compute()
			if diff := cmp.Diff(tc.want, boundLines(plan)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if got := warningsText(ws); got != tc.wantW {
				t.Errorf("warnings:\n got %s\nwant %s", got, tc.wantW)
			}

			// The other node goes: its address is served bound again,
			// and the service is re-planned for it.
			e.DeleteNode("node-b")
			if got := e.Reassigned(); !cmp.Equal(got, []ServiceKey{s.Key}) {
				t.Errorf("a node address going away reassigns %v, want [default/web]", got)
			}
			sp, _ := e.ComputeService(s.Key)
			if got := boundLines(Plan{VirtualServers: sp.VirtualServers}); !slices.Contains(got, "ExternalIP 192.168.0.2:80/TCP bound") {
				t.Errorf("192.168.0.2 not served bound after node-b went: %v", got)
			}
		})
	}
}

// boundLines renders each virtual server as kind, key and whether it is
// bound on the dummy interface.
func boundLines(p Plan) []string {
	var out []string
	for _, vs := range p.VirtualServers {
		b := "bound"
		if !vs.Bound() {
			b = "unbound"
		}
		out = append(out, string(vs.Kind)+" "+vs.Key().String()+" "+b)
	}
	return out
}

// TestClusterIPTakesItsAddressFromExternalClaims: a Service arriving with
// a ClusterIP that another service lists as an external IP takes the
// address on every port, and the other service is reported reassigned;
// when the ClusterIP's Service goes, the external claim is served again.
func TestClusterIPTakesItsAddressFromExternalClaims(t *testing.T) {
	grab := svc("grab", clusterIP("10.96.0.99"), externalIPs("10.96.0.10"), func(s *Service) { s.Ports[0].Port = 443 })
	e, _ := newEngine(t, world{svcs: []*Service{grab}})
	e.Reassigned()
	holds := func() bool {
		sp, _ := e.ComputeService(grab.Key)
		return slices.ContainsFunc(sp.VirtualServers, func(vs VirtualServer) bool { return vs.Address == ip("10.96.0.10") })
	}
	if !holds() {
		t.Fatal("grab does not hold 10.96.0.10:443 before any Service has that ClusterIP")
	}
	dns := svc("kube-dns", inNamespace("kube-system"), clusterIP("10.96.0.10"), func(s *Service) { s.Ports[0].Port = 53 })
	e.UpsertService(dns)
	if got := e.Reassigned(); !cmp.Equal(got, []ServiceKey{grab.Key}) {
		t.Errorf("the ClusterIP arriving reassigns %v, want [default/grab]", got)
	}
	if holds() {
		t.Error("grab still holds 10.96.0.10:443, another Service's ClusterIP (another port)")
	}
	e.DeleteService(dns.Key)
	if got := e.Reassigned(); !cmp.Equal(got, []ServiceKey{grab.Key}) {
		t.Errorf("the ClusterIP going reassigns %v, want [default/grab]", got)
	}
	if !holds() {
		t.Error("grab does not hold 10.96.0.10:443 after the ClusterIP's Service went")
	}
}

// TestNodePortAddressesFromLocalInterfaces: once the host's addresses are
// known they are the NodePort addresses (kube-proxy's IPVS mode), with
// --nodeport-addresses CIDRs filtering them; "primary" keeps the Node's
// primary IPs; without them, the Node's status addresses.
func TestNodePortAddressesFromLocalInterfaces(t *testing.T) {
	local := []netip.Addr{ip("192.168.0.1"), ip("10.10.0.5"), ip("fd00::1")}
	for _, tc := range []struct {
		name      string
		cfg       Config
		withLocal bool
		want      []string
	}{
		{name: "no local addresses: the Node's", want: []string{"192.168.0.1"}},
		{name: "every local address", withLocal: true, want: []string{"10.10.0.5", "192.168.0.1"}},
		{name: "CIDR filter", withLocal: true, cfg: Config{NodePortAddresses: []string{"10.10.0.0/16"}}, want: []string{"10.10.0.5"}},
		{name: "primary", withLocal: true, cfg: Config{NodePortAddresses: []string{"primary"}}, want: []string{"192.168.0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{cfg: tc.cfg, svcs: []*Service{svc("web", nodePort(30080))}})
			if tc.withLocal {
				e.SetLocalAddresses(local)
			}
			plan, _ := e.Compute()
			var got []string
			for _, vs := range plan.VirtualServers {
				if vs.Kind == KindNodePort {
					got = append(got, vs.Address.String())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NodePort addresses (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetLocalAddressesReportsChanges: only a real change re-plans.
func TestSetLocalAddressesReportsChanges(t *testing.T) {
	e, _ := newEngine(t, world{svcs: []*Service{svc("web", nodePort(30080))}})
	if !e.SetLocalAddresses([]netip.Addr{ip("10.0.0.2"), ip("10.0.0.1")}) {
		t.Error("first SetLocalAddresses reported no change")
	}
	if e.SetLocalAddresses([]netip.Addr{ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.1")}) {
		t.Error("the same addresses in another order reported a change")
	}
}

// TestLocalReadyEndpointsCountsUniqueAddresses: a pod serving two ports
// counts once, as kube-proxy's LocalReadyEndpoints.
func TestLocalReadyEndpointsCountsUniqueAddresses(t *testing.T) {
	s := svc("web", func(s *Service) {
		s.Ports = append(s.Ports, ServicePort{Name: "metrics", Protocol: ProtocolTCP, Port: 9090})
		s.HealthCheckNodePort = 32000
	})
	sl := slice("web", "web-1", ep("10.244.1.5", local()), ep("10.244.1.6", local()), ep("10.244.2.5"))
	sl.Ports = append(sl.Ports, EndpointPort{Name: "metrics", Protocol: ProtocolTCP, Port: 9090})
	e, _ := newEngine(t, world{svcs: []*Service{s}, slices: []*EndpointSlice{sl}})
	sp, _ := e.ComputeService(s.Key)
	if sp.LocalReadyEndpoints != 2 {
		t.Errorf("LocalReadyEndpoints = %d, want 2 (two local pods, two ports each)", sp.LocalReadyEndpoints)
	}
}

// TestExternalLocalInternalClientsGoViaTheClusterIP: an eTP=Local
// external virtual server sends in-cluster clients to the service's
// ClusterIP of its family (its internal traffic policy's destinations),
// except a load balancer with source ranges, whose every client is
// checked against them; eTP=Cluster has no such route.
func TestExternalLocalInternalClientsGoViaTheClusterIP(t *testing.T) {
	s := svc("web", nodePort(30080), externalIPs("203.0.113.7"), lbIPs("198.51.100.1"), func(s *Service) {
		s.ClusterIPs = append(s.ClusterIPs, ip("fd00:96::1"))
		s.ExternalLocal = true
	})
	ranged := svc("ranged", clusterIP("10.96.0.2"), lbIPs("198.51.100.2"), func(s *Service) {
		s.ExternalLocal = true
		s.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	})
	cluster := svc("cluster", clusterIP("10.96.0.3"), lbIPs("198.51.100.3"))
	e, _ := newEngine(t, world{nodes: []*Node{node(thisNode, thisZone, "192.168.0.1", "fd00::1")},
		svcs: []*Service{s, ranged, cluster}})
	plan, _ := e.Compute()
	got := map[string]string{}
	for _, vs := range plan.VirtualServers {
		got[string(vs.Kind)+" "+vs.Key().String()] = vs.InternalVia.String()
	}
	want := map[string]string{
		"ClusterIP 10.96.0.1:80/TCP":       "invalid AddrPort",
		"ClusterIP 10.96.0.2:80/TCP":       "invalid AddrPort",
		"ClusterIP 10.96.0.3:80/TCP":       "invalid AddrPort",
		"ClusterIP [fd00:96::1]:80/TCP":    "invalid AddrPort",
		"NodePort 192.168.0.1:30080/TCP":   "10.96.0.1:80",
		"NodePort [fd00::1]:30080/TCP":     "[fd00:96::1]:80",
		"ExternalIP 203.0.113.7:80/TCP":    "10.96.0.1:80",
		"LoadBalancer 198.51.100.1:80/TCP": "10.96.0.1:80",
		"LoadBalancer 198.51.100.2:80/TCP": "invalid AddrPort",
		"LoadBalancer 198.51.100.3:80/TCP": "invalid AddrPort",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("InternalVia by virtual server (-want +got):\n%s", diff)
	}
}
