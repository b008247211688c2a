package policy

import (
	"net/netip"
	"slices"
	"testing"
)

// TestNoTrackIsRefusedOnEndpointsItDoesNotOwn: NOTRACK is refused (the
// Service served tracked, with a warning naming the endpoint and the
// Service it came through) where an endpoint is shared with a Service
// this proxy does not serve, whose traffic is tracked: another proxy's,
// a headless one (no ClusterIP), one skipped as invalid; and where an
// endpoint is a node's address (the kubelet's port), this node's or
// another's. The refusal follows those changing.
func TestNoTrackIsRefusedOnEndpointsItDoesNotOwn(t *testing.T) {
	const prefix = "Service default/dns: metadata.annotations[kube-ipvs-proxy.io/notrack]: "
	const suffix = ": NOTRACK is not applied (a connection tracked one way only breaks TCP); this Service's traffic stays tracked"
	other := ServiceKey{"team-b", "other"}
	for _, tc := range []struct {
		name      string
		endpoints []string // dns's endpoints
		unmanaged map[ServiceKey][]string
		shared    []string // other's endpoints
		nodeAddrs []string // another node's addresses
		want      bool     // dns is served NOTRACK
		warn      string
	}{
		{name: "another proxy's Service shares an endpoint",
			endpoints: []string{"10.244.1.5", "10.244.1.6"}, unmanaged: map[ServiceKey][]string{other: {"10.96.0.2"}},
			shared: []string{"10.244.1.6"},
			warn: prefix + "endpoint 10.244.1.6:8080/TCP of this Service is also an endpoint of Service team-b/other, which this proxy does not serve " +
				"(another proxy's, headless or invalid) and whose traffic is tracked" + suffix},
		{name: "a headless Service's pod",
			endpoints: []string{"10.244.1.6"}, unmanaged: map[ServiceKey][]string{other: nil}, shared: []string{"10.244.1.6"},
			warn: prefix + "endpoint 10.244.1.6:8080/TCP of this Service is also an endpoint of Service team-b/other, which this proxy does not serve " +
				"(another proxy's, headless or invalid) and whose traffic is tracked" + suffix},
		{name: "this node's address (the kubelet's port)",
			endpoints: []string{"10.244.1.5", "192.168.0.1"},
			warn:      prefix + "endpoint 192.168.0.1:8080/TCP of this Service is a node's address" + suffix},
		{name: "another node's address",
			endpoints: []string{"192.168.0.7"}, nodeAddrs: []string{"192.168.0.7"},
			warn: prefix + "endpoint 192.168.0.7:8080/TCP of this Service is a node's address" + suffix},
		{name: "an unmanaged Service sharing nothing",
			endpoints: []string{"10.244.1.5"}, unmanaged: map[ServiceKey][]string{other: {"10.96.0.2"}}, shared: []string{"10.244.1.6"},
			want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var eps []Endpoint
			for _, a := range tc.endpoints {
				eps = append(eps, ep(a))
			}
			dns := svc("dns", annotate(AnnotationNoTrack, "true"))
			e, _ := newEngine(t, world{svcs: []*Service{dns}, slices: []*EndpointSlice{slice("dns", "dns-1", eps...)}})
			if len(tc.shared) > 0 {
				var shared []Endpoint
				for _, a := range tc.shared {
					shared = append(shared, ep(a))
				}
				s := slice("other", "other-1", shared...)
				s.Service = other
				e.UpsertEndpointSlice(s)
			}
			e.Reassigned()
			for k, cips := range tc.unmanaged {
				var addrs []netip.Addr
				for _, a := range cips {
					addrs = append(addrs, ip(a))
				}
				e.SetUnmanagedService(k, addrs)
			}
			var addrs []netip.Addr
			for _, a := range tc.nodeAddrs {
				addrs = append(addrs, ip(a))
			}
			e.SetNodeAddresses("node-b", addrs)
			if changed := len(tc.unmanaged) > 0 && len(tc.shared) > 0 && !tc.want || len(tc.nodeAddrs) > 0; changed &&
				!slices.Contains(e.Reassigned(), dns.Key) {
				t.Error("the change that refuses NOTRACK does not re-plan dns")
			}
			sp, _ := e.ComputeService(dns.Key)
			if len(sp.VirtualServers) == 0 || sp.VirtualServers[0].NoTrack != tc.want {
				t.Errorf("dns NOTRACK: %+v, want %v", sp.VirtualServers, tc.want)
			}
			if got := warningsText(sp.Warnings); got != tc.warn {
				t.Errorf("warnings:\n got %s\nwant %s", got, tc.warn)
			}

			// The unmanaged Service going, or the node, dns is NOTRACK again
			// (but on this node's own address).
			for k := range tc.unmanaged {
				e.DeleteUnmanagedService(k)
			}
			e.SetNodeAddresses("node-b", nil)
			if sp, _ := e.ComputeService(dns.Key); !slices.Contains(tc.endpoints, "192.168.0.1") && !sp.VirtualServers[0].NoTrack {
				t.Errorf("dns not NOTRACK once the unmanaged Service and the node went: %s", warningsText(sp.Warnings))
			}
		})
	}
}
