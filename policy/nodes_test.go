package policy

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestAnotherNodesAddressIsServedUnbound: an external or load-balancer
// IP that is another Node's address, given by SetNodeAddresses (the real
// mode's watch of every Node), is served unbound on this node, as this
// node's own address is, and only the services listing it are re-planned
// when it comes or goes; another node's labels, set apart, leave its
// addresses alone.
func TestAnotherNodesAddressIsServedUnbound(t *testing.T) {
	web := svc("web", externalIPs("192.168.0.2", "203.0.113.7"), lbIPs("192.168.0.3"))
	other := svc("other", clusterIP("10.96.0.2"), externalIPs("203.0.113.8"))
	for _, tc := range []struct {
		name string
		cfg  Config
		step func(e *Engine)
		want []string // kind address bound|unbound
		// wantReassigned are the services re-planned by the step.
		wantReassigned []ServiceKey
	}{
		{
			name: "another node's InternalIP and ExternalIP are served unbound",
			step: func(e *Engine) { e.SetNodeAddresses("node-b", []netip.Addr{ip("192.168.0.3"), ip("192.168.0.2")}) },
			want: []string{"ClusterIP 10.96.0.1:80/TCP bound", "ExternalIP 192.168.0.2:80/TCP unbound",
				"LoadBalancer 192.168.0.3:80/TCP unbound", "ExternalIP 203.0.113.7:80/TCP bound"},
			wantReassigned: []ServiceKey{web.Key},
		},
		{
			name:           "refused with --refuse-node-address-external-ips",
			cfg:            Config{RefuseNodeAddresses: true},
			step:           func(e *Engine) { e.SetNodeAddresses("node-b", []netip.Addr{ip("192.168.0.2"), ip("192.168.0.3")}) },
			want:           []string{"ClusterIP 10.96.0.1:80/TCP bound", "ExternalIP 203.0.113.7:80/TCP bound"},
			wantReassigned: []ServiceKey{web.Key},
		},
		{
			name: "its labels, set apart, leave its addresses",
			step: func(e *Engine) {
				e.SetNodeAddresses("node-b", []netip.Addr{ip("192.168.0.2")})
				e.Reassigned()
				e.SetNodeLabels("node-b", map[string]string{LabelTopologyZone: "zone-b"})
				e.SetNodeLabels("node-b", nil)
			},
			want: []string{"ClusterIP 10.96.0.1:80/TCP bound", "ExternalIP 192.168.0.2:80/TCP unbound",
				"LoadBalancer 192.168.0.3:80/TCP bound", "ExternalIP 203.0.113.7:80/TCP bound"},
		},
		{
			name: "the same addresses again re-plan nothing",
			step: func(e *Engine) {
				e.SetNodeAddresses("node-b", []netip.Addr{ip("192.168.0.2")})
				e.Reassigned()
				if e.SetNodeAddresses("node-b", []netip.Addr{ip("192.168.0.2"), ip("192.168.0.2")}) {
					t.Error("the same addresses reported changed")
				}
			},
			want: []string{"ClusterIP 10.96.0.1:80/TCP bound", "ExternalIP 192.168.0.2:80/TCP unbound",
				"LoadBalancer 192.168.0.3:80/TCP bound", "ExternalIP 203.0.113.7:80/TCP bound"},
		},
		{
			name: "the node gone, its address is bound again",
			step: func(e *Engine) {
				e.SetNodeAddresses("node-b", []netip.Addr{ip("192.168.0.2")})
				e.Reassigned()
				e.SetNodeAddresses("node-b", nil)
			},
			want: []string{"ClusterIP 10.96.0.1:80/TCP bound", "ExternalIP 192.168.0.2:80/TCP bound",
				"LoadBalancer 192.168.0.3:80/TCP bound", "ExternalIP 203.0.113.7:80/TCP bound"},
			wantReassigned: []ServiceKey{web.Key},
		},
		{
			name: "this node's name is ignored: its Node comes whole",
			step: func(e *Engine) { e.SetNodeAddresses(thisNode, []netip.Addr{ip("192.168.0.2")}) },
			want: []string{"ClusterIP 10.96.0.1:80/TCP bound", "ExternalIP 192.168.0.2:80/TCP bound",
				"LoadBalancer 192.168.0.3:80/TCP bound", "ExternalIP 203.0.113.7:80/TCP bound"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newEngine(t, world{cfg: tc.cfg, svcs: []*Service{web, other}})
			e.Reassigned()
			tc.step(e)
			if got := e.Reassigned(); !cmp.Equal(got, tc.wantReassigned, cmpopts.EquateEmpty()) {
				t.Errorf("re-planned %v, want %v", got, tc.wantReassigned)
			}
			sp, _ := e.ComputeService(web.Key)
			got := boundLines(Plan{VirtualServers: sp.VirtualServers})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("web's virtual servers (-want +got):\n%s", diff)
			}
			if sp, _ := e.ComputeService(other.Key); !slices.Contains(boundLines(Plan{VirtualServers: sp.VirtualServers}), "ExternalIP 203.0.113.8:80/TCP bound") {
				t.Errorf("other's external IP is no longer served bound: %v", sp.VirtualServers)
			}
		})
	}
}
