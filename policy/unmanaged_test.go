package policy

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClusterIPIsOwnedWhateverItsServicesState: an external or
// load-balancer IP equal to the ClusterIP of a Service this proxy does
// not serve (another proxy's, or skipped as invalid) is refused on every
// port, as one equal to a served Service's; the claim is served again
// when that Service goes, and when it becomes served the address stays
// refused.
func TestClusterIPIsOwnedWhateverItsServicesState(t *testing.T) {
	theirs := ServiceKey{"team-b", "theirs"}
	grab := svc("grab", clusterIP("10.96.0.99"), externalIPs("10.96.0.10"), lbIPs("10.96.0.11"))
	for _, tc := range []struct {
		name string
		cips []netip.Addr
		want []string // grab's virtual servers
		warn string
	}{
		{name: "another proxy's Service's ClusterIP is refused as an external IP",
			cips: []netip.Addr{ip("10.96.0.10")},
			want: []string{"LoadBalancer 10.96.0.11:80/TCP bound", "ClusterIP 10.96.0.99:80/TCP bound"},
			warn: "Service default/grab: spec.externalIPs: 10.96.0.10 is the ClusterIP of Service team-b/theirs, which owns it on every port; not served here"},
		{name: "and as a load-balancer IP, of either family",
			cips: []netip.Addr{ip("10.96.0.11"), ip("fd00::11")},
			want: []string{"ExternalIP 10.96.0.10:80/TCP bound", "ClusterIP 10.96.0.99:80/TCP bound"},
			warn: "Service default/grab: status.loadBalancer.ingress.ip: 10.96.0.11 is the ClusterIP of Service team-b/theirs, which owns it on every port; not served here"},
		{name: "a headless one holds nothing",
			want: []string{"ExternalIP 10.96.0.10:80/TCP bound", "LoadBalancer 10.96.0.11:80/TCP bound", "ClusterIP 10.96.0.99:80/TCP bound"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{svcs: []*Service{grab}})
			e.Reassigned()
			e.SetUnmanagedService(theirs, tc.cips)
			if got := e.Reassigned(); len(tc.cips) > 0 && !cmp.Equal(got, []ServiceKey{grab.Key}) {
				t.Errorf("the unmanaged ClusterIP arriving re-plans %v, want [default/grab]", got)
			}
			sp, _ := e.ComputeService(grab.Key)
			if diff := cmp.Diff(tc.want, boundLines(Plan{VirtualServers: sp.VirtualServers})); diff != "" {
				t.Errorf("grab (-want +got):\n%s", diff)
			}
			if got := warningsText(sp.Warnings); got != tc.warn {
				t.Errorf("warnings:\n got %s\nwant %s", got, tc.warn)
			}
			if sp, ok := e.ComputeService(theirs); ok || len(sp.VirtualServers) > 0 {
				t.Errorf("the unmanaged Service is planned: %+v", sp)
			}

			// Served now (its label removed): its ClusterIP stays refused.
			served := svc("theirs", inNamespace("team-b"), func(s *Service) { s.ClusterIPs = tc.cips })
			if len(tc.cips) > 0 {
				e.UpsertService(served)
				if sp, _ := e.ComputeService(grab.Key); len(sp.VirtualServers) != len(tc.want) {
					t.Errorf("grab once theirs is served: %v, want %v", boundLines(Plan{VirtualServers: sp.VirtualServers}), tc.want)
				}
				e.DeleteService(served.Key)
			}
			// Gone: grab takes every address.
			e.DeleteUnmanagedService(theirs)
			if sp, _ := e.ComputeService(grab.Key); len(sp.VirtualServers) != 3 {
				t.Errorf("grab once theirs is gone: %v, want its three virtual servers", boundLines(Plan{VirtualServers: sp.VirtualServers}))
			}
		})
	}
}

// TestRefusedServiceKeepsItsLoadBalancerIP: a Service the per-Service
// budget or the node-wide ceiling refuses keeps its load-balancer IPs
// from other Services' external IPs, on every port (its load balancer
// still sends their traffic here); another Service's load-balancer IP on
// the address (a shared one) is still served; once served again, the
// refused Service owns its virtual servers as before.
func TestRefusedServiceKeepsItsLoadBalancerIP(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{name: "refused by the per-Service budget", cfg: Config{MaxVirtualServers: 3}},
		{name: "refused by the node-wide ceiling", cfg: Config{MaxVirtualServersPerNode: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			big := svc("big", createdAt(2), lbIPs("198.51.100.7"), func(s *Service) {
				for p := uint16(81); p <= 83; p++ {
					s.Ports = append(s.Ports, ServicePort{Name: "p" + string(rune('0'+p-80)), Protocol: ProtocolTCP, Port: p})
				}
			})
			taker := svc("taker", createdAt(1), clusterIP("10.96.0.2"), externalIPs("198.51.100.7"), func(s *Service) { s.Ports[0].Port = 443 })
			sharer := svc("sharer", createdAt(1), clusterIP("10.96.0.3"), lbIPs("198.51.100.7"), func(s *Service) { s.Ports[0].Port = 8443 })
			e, _ := newEngine(t, world{cfg: tc.cfg, svcs: []*Service{taker, sharer, big}})
			plan, ws := e.Compute()
			if got := owners(plan); got["198.51.100.7:443/TCP"] != "" || got["198.51.100.7:8443/TCP"] != "default/sharer" {
				t.Errorf("while big is refused: %v; want 198.51.100.7:443 unserved, 198.51.100.7:8443 sharer's", got)
			}
			want := "Service default/taker: spec.externalIPs: 198.51.100.7 is a load-balancer IP of Service default/big, which keeps it on every port while refused (too many virtual servers); not served here"
			if !slices.Contains(warningLines(ws), want) {
				t.Errorf("warnings lack %q:\n%s", want, warningsText(ws))
			}

			// big deleted: the address is free for taker's external IP.
			e.DeleteService(big.Key)
			if got := e.Reassigned(); !slices.Contains(got, taker.Key) {
				t.Errorf("big going re-plans %v, want taker among them", got)
			}
			if sp, _ := e.ComputeService(taker.Key); !slices.ContainsFunc(sp.VirtualServers, func(vs VirtualServer) bool { return vs.Address == ip("198.51.100.7") }) {
				t.Errorf("taker does not serve 198.51.100.7 once big is gone: %v", boundLines(Plan{VirtualServers: sp.VirtualServers}))
			}
		})
	}
}

func warningLines(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.String())
	}
	return out
}
