package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
)

// manyPorts gives a service n TCP ports, 1000 and up.
func manyPorts(n int) svcOpt {
	return func(s *Service) {
		s.Ports = nil
		for i := range n {
			s.Ports = append(s.Ports, ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: ProtocolTCP, Port: uint16(1000 + i)})
		}
	}
}

// manyExternalIPs gives a service n external IPs in 198.18.0.0/15.
func manyExternalIPs(n int) svcOpt {
	return func(s *Service) {
		s.ExternalIPs = nil
		for i := range n {
			s.ExternalIPs = append(s.ExternalIPs, netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}))
		}
	}
}

// TestPerServiceBudget: a Service whose ports × addresses on this node
// exceed Config.MaxVirtualServers is not served (no virtual server, no
// claim) and gets one warning with the count and the limit; one at the
// limit is served; 0 means no limit.
func TestPerServiceBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   int
		svc     *Service
		wantVSs int
		warn    string
	}{
		{name: "50 ports × 1,000 external IPs: refused", limit: 1000, svc: svc("big", manyPorts(50), manyExternalIPs(1000)),
			warn: "Service default/big: spec: 50 ports on 1 ClusterIPs, 1000 external and 0 load-balancer IPs make 50050 virtual servers, " +
				"over the limit of 1000 per Service (--max-virtual-servers-per-service, maxVirtualServersPerService); not served"},
		{name: "NodePorts do not count against the budget", limit: 5, svc: svc("np", manyPorts(5), func(s *Service) {
			for i := range s.Ports {
				s.Ports[i].NodePort = uint16(30000 + i)
			}
		}), wantVSs: 10},
		{name: "at the limit: served", limit: 1000, svc: svc("ok", manyPorts(10), manyExternalIPs(99)), wantVSs: 1000},
		{name: "no limit", limit: 0, svc: svc("any", manyPorts(20), manyExternalIPs(100)), wantVSs: 2020},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{cfg: Config{MaxVirtualServers: tc.limit}, svcs: []*Service{tc.svc}})
			plan, ws := e.Compute()
			if len(plan.VirtualServers) != tc.wantVSs {
				t.Errorf("%d virtual servers, want %d", len(plan.VirtualServers), tc.wantVSs)
			}
			if got := warningsText(ws); got != tc.warn {
				t.Errorf("warnings:\n got %s\nwant %s", got, tc.warn)
			}
			if tc.wantVSs == 0 && len(e.claims.bySvc[tc.svc.Key]) != 0 {
				t.Errorf("a refused service claims %d virtual servers", len(e.claims.bySvc[tc.svc.Key]))
			}
		})
	}
}

// TestOverBudgetCostsNoExpansion: refusing 1,000 ports × 10,000 external
// IPs (10 M virtual servers) allocates about what the Service object
// itself holds, not per virtual server.
func TestOverBudgetCostsNoExpansion(t *testing.T) {
	big := svc("huge", manyPorts(1000), manyExternalIPs(10000))
	allocs := testing.AllocsPerRun(3, func() {
		e, _ := newEngine(t, world{cfg: Config{MaxVirtualServers: 1000}})
		e.UpsertService(big)
		e.ComputeService(big.Key)
	})
	if allocs > 50000 { // the external-address index: about one allocation per address
		t.Errorf("upserting and computing a refused 10 M virtual server Service made %.0f allocations", allocs)
	}
	t.Logf("%.0f allocations", allocs)
}

// TestNodeWideCeiling: with Config.MaxVirtualServersPerNode, services are
// admitted oldest first while their virtual servers fit; one that does
// not is refused with a warning and a younger, smaller one may still fit;
// an older service growing pushes out the youngest, and one going lets
// the refused back (both reported by Reassigned).
func TestNodeWideCeiling(t *testing.T) {
	a := svc("a", clusterIP("10.96.0.1"), externalIPs("203.0.113.1"), createdAt(1))                               // 2
	b := svc("b", clusterIP("10.96.0.2"), externalIPs("203.0.113.2", "203.0.113.3", "203.0.113.4"), createdAt(2)) // 4
	c := svc("c", clusterIP("10.96.0.3"), externalIPs("203.0.113.5"), createdAt(3))                               // 2
	e, _ := newEngine(t, world{cfg: Config{MaxVirtualServersPerNode: 5}, svcs: []*Service{c, b, a}})
	e.Reassigned()
	served := func() []string {
		var out []string
		for _, k := range e.Services() {
			if sp, _ := e.ComputeService(k); len(sp.VirtualServers) > 0 {
				out = append(out, k.Name)
			}
		}
		return out
	}
	if got := served(); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("served %v, want [a c]", got)
	}
	_, ws := e.Compute()
	want := "Service default/b: spec: its 4 virtual servers (NodePorts included) do not fit under this node's ceiling of 5 (--max-virtual-servers-per-node, maxVirtualServersPerNode), 2 taken by older Services; not served"
	if got := warningsText(ws); got != want {
		t.Errorf("warnings:\n got %s\nwant %s", got, want)
	}

	grown := svc("a", clusterIP("10.96.0.1"), externalIPs("203.0.113.1", "203.0.113.6", "203.0.113.7", "203.0.113.8"), createdAt(1)) // 5
	e.UpsertService(grown)
	if got := e.Reassigned(); !slices.Contains(got, c.Key) {
		t.Errorf("the oldest service growing reassigns %v, want default/c among them", got)
	}
	if got := served(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("served %v after a grew, want [a]", got)
	}
	e.DeleteService(a.Key)
	if got := e.Reassigned(); !slices.Contains(got, b.Key) {
		t.Errorf("the oldest service going reassigns %v, want default/b among them", got)
	}
	if got := served(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("served %v after a went, want [b] (4, then c's 2 do not fit)", got)
	}
}

// TestNodeWideCeilingCountsNodePorts: the node-wide ceiling counts every
// virtual server of this node, a Service's NodePorts on each NodePort
// address included, and re-admits when the node's addresses shrink.
func TestNodeWideCeilingCountsNodePorts(t *testing.T) {
	withNodePorts := func(s *Service) {
		for i := range s.Ports {
			s.Ports[i].NodePort = uint16(30000 + i)
		}
	}
	for _, tc := range []struct {
		name    string
		ceiling int
		local   []string // this node's NodePort addresses
		wantVSs int      // 3 ports: 3 ClusterIP + 3 per NodePort address
	}{
		{name: "3 ClusterIP and 6 NodePort virtual servers fit under 9", ceiling: 9, local: []string{"192.168.0.1", "192.168.1.1"}, wantVSs: 9},
		{name: "they do not fit under 8", ceiling: 8, local: []string{"192.168.0.1", "192.168.1.1"}},
		{name: "with one NodePort address, 6 fit under 8", ceiling: 8, local: []string{"192.168.0.1"}, wantVSs: 6},
		{name: "NodePorts of the other family are not on this node", ceiling: 6, local: []string{"192.168.0.1", "fd00::1"}, wantVSs: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := svc("np", manyPorts(3), withNodePorts)
			e, _ := newEngine(t, world{cfg: Config{MaxVirtualServersPerNode: tc.ceiling}, svcs: []*Service{np}})
			var local []netip.Addr
			for _, a := range tc.local {
				local = append(local, ip(a))
			}
			e.SetLocalAddresses(local)
			plan, ws := e.Compute()
			if len(plan.VirtualServers) != tc.wantVSs {
				t.Errorf("%d virtual servers, want %d (warnings: %s)", len(plan.VirtualServers), tc.wantVSs, warningsText(ws))
			}
		})
	}
}
