package policy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAddressRefusal(t *testing.T) {
	tests := []struct {
		addr string
		want string // "" when a Service may take it
	}{
		{"127.0.0.1", "a loopback address"},
		{"127.255.0.9", "a loopback address"},
		{"::1", "a loopback address"},
		{"::ffff:127.0.0.1", "a loopback address"},
		{"0.0.0.0", "the unspecified address"},
		{"::", "the unspecified address"},
		{"169.254.169.254", "a link-local address"},
		{"169.254.0.1", "a link-local address"},
		{"fe80::1", "a link-local address"},
		{"febf::1", "a link-local address"},
		{"224.0.0.1", "a multicast address"},
		{"239.255.255.250", "a multicast address"},
		{"ff02::1", "a multicast address"},
		{"ff0e::1", "a multicast address"},
		{"255.255.255.255", "the broadcast address"},
		{"192.0.2.1", ""},
		{"10.0.0.1", ""},
		{"198.51.100.255", ""}, // a subnet's broadcast address is an ordinary address here
		{"2001:db8::1", ""},
		{"fec0::1", ""}, // not link-local (fe80::/10 ends at febf)
		{"169.255.0.1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.addr, func(t *testing.T) {
			if got := AddressRefusal(ip(tc.addr)); got != tc.want {
				t.Errorf("AddressRefusal(%s) = %q, want %q", tc.addr, got, tc.want)
			}
		})
	}
	if got := AddressRefusal(netip.Addr{}); got == "" {
		t.Error("the zero Addr may be taken, want it refused")
	}
}

// TestRefusedAddressesNeverServed: the engine refuses the addresses no
// Service may take even when given them (apiconv leaves them out before):
// no virtual server, a RefusedAddress warning each; the Service's other
// addresses are served.
func TestRefusedAddressesNeverServed(t *testing.T) {
	s := svc("web", externalIPs("127.0.0.1", "203.0.113.7", "169.254.169.254"), lbIPs("0.0.0.0", "224.0.0.1", "255.255.255.255", "198.51.100.1"))
	e, _ := newEngine(t, world{svcs: []*Service{s}})
	plan, ws := e.Compute()
	want := []string{"ClusterIP 10.96.0.1:80/TCP bound", "LoadBalancer 198.51.100.1:80/TCP bound", "ExternalIP 203.0.113.7:80/TCP bound"}
	if diff := cmp.Diff(want, boundLines(plan)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	var refused []string
	for _, w := range ws {
		if w.Reason == ReasonRefusedAddress && w.Service == s.Key {
			refused = append(refused, strings.Fields(w.Message)[0])
		}
	}
	if diff := cmp.Diff([]string{"127.0.0.1", "169.254.169.254", "0.0.0.0", "224.0.0.1", "255.255.255.255"}, refused); diff != "" {
		t.Errorf("RefusedAddress warnings (-want +got):\n%s\nall: %v", diff, ws)
	}
}

// TestAddressOfAFamilyWithoutClusterIPWarned: an external or
// load-balancer IP of a family the Service has no ClusterIP of is not
// served, as in kube-proxy, and said.
func TestAddressOfAFamilyWithoutClusterIPWarned(t *testing.T) {
	s := svc("web", externalIPs("2001:db8::7", "203.0.113.7"), lbIPs("2001:db8::1"))
	e, _ := newEngine(t, world{svcs: []*Service{s}})
	plan, ws := e.Compute()
	want := []string{"ClusterIP 10.96.0.1:80/TCP bound", "ExternalIP 203.0.113.7:80/TCP bound"}
	if diff := cmp.Diff(want, boundLines(plan)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	wantW := "Service default/web: spec.externalIPs: 2001:db8::7 is IPv6 and the Service has no IPv6 ClusterIP; not served\n" +
		"Service default/web: status.loadBalancer.ingress.ip: 2001:db8::1 is IPv6 and the Service has no IPv6 ClusterIP; not served"
	if got := warningsText(ws); got != wantW {
		t.Errorf("warnings:\n got %s\nwant %s", got, wantW)
	}
	for _, w := range ws {
		if w.Reason != ReasonAddressFamilyNotServed {
			t.Errorf("warning %v has reason %q, want %q", w, w.Reason, ReasonAddressFamilyNotServed)
		}
	}
}

// TestConversionWarningsComeBackWithThePlan: what apiconv left out of a
// Service and of its slices (Service.Warnings, EndpointSlice.Warnings) is
// in every plan of the Service, served or refused by the budget, and
// goes when the slice no longer says it.
func TestConversionWarningsComeBackWithThePlan(t *testing.T) {
	key := ServiceKey{"default", "web"}
	svcW := Warning{Object: "Service default/web", Field: "spec.externalIPs[1]", Reason: ReasonInvalidAddress, Service: key, Message: "invalid"}
	sliceW := Warning{Object: "EndpointSlice default/web-1", Field: "endpoints[0].addresses[0]", Reason: ReasonRefusedAddress, Service: key, Message: "loopback"}
	s := svc("web", externalIPs("203.0.113.7"), func(s *Service) { s.Warnings = []Warning{svcW} })
	sl := slice("web", "web-1", ep("10.244.0.1"))
	sl.Warnings = []Warning{sliceW}
	for _, limit := range []int{0, 1} {
		e, _ := newEngine(t, world{cfg: Config{MaxVirtualServers: limit}, svcs: []*Service{s}, slices: []*EndpointSlice{sl}})
		sp, _ := e.ComputeService(key)
		if !slices.Contains(sp.Warnings, svcW) || !slices.Contains(sp.Warnings, sliceW) {
			t.Errorf("limit %d: plan warnings %v, want the Service's and the slice's", limit, sp.Warnings)
		}
		if over := slices.ContainsFunc(sp.Warnings, func(w Warning) bool { return w.Reason == ReasonTooManyVirtualServers }); over != (limit == 1) {
			t.Errorf("limit %d: refused by the budget %v, want %v: %v", limit, over, limit == 1, sp.Warnings)
		}
		clean := slice("web", "web-1", ep("10.244.0.1"))
		e.UpsertEndpointSlice(clean)
		sp, _ = e.ComputeService(key)
		if slices.Contains(sp.Warnings, sliceW) {
			t.Errorf("limit %d: the slice's warning stays after the slice was replaced: %v", limit, sp.Warnings)
		}
		if len(s.Warnings) != 1 {
			t.Errorf("limit %d: computing changed the Service's own warnings: %v", limit, s.Warnings)
		}
	}
}
