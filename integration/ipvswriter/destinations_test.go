//go:build integration

package ipvswriter

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// TestDestinationsReadAsMobyReadsThem: the Kernel's Destinations, which
// lists on its own generic netlink socket rather than through
// moby/ipvs, reads every destination as moby/ipvs's GetDestinations
// does (address, port, weight, forwarding method, connection counts):
// IPv4 and IPv6, TCP and UDP, weights 0 to 100, the local and the
// masquerading methods, and nothing for a virtual server that does not
// exist.
func TestDestinationsReadAsMobyReadsThem(t *testing.T) {
	h, k := mobyAndKernel(t)
	type vsSpec struct {
		addr  string
		port  uint16
		proto uint16
		dests []string
	}
	specs := []vsSpec{
		{"10.96.0.10", 80, unix.IPPROTO_TCP, []string{"10.244.1.5", "10.244.1.6", "10.244.2.7"}},
		{"10.96.0.10", 53, unix.IPPROTO_UDP, []string{"10.244.1.5"}},
		{"fd00:96::10", 443, unix.IPPROTO_TCP, []string{"fd00:244::5", "fd00:244::6"}},
	}
	for _, s := range specs {
		svc := mobyService(s.addr, s.port, s.proto)
		if err := h.NewService(svc); err != nil {
			t.Fatalf("NewService %s: %v", s.addr, err)
		}
		for i, d := range s.dests {
			a := netip.MustParseAddr(d)
			md := &mobyipvs.Destination{Address: a.AsSlice(), Port: 8080 + uint16(i), Weight: []int{0, 1, 100}[i%3],
				AddressFamily: svc.AddressFamily}
			if i == 1 {
				md.ConnectionFlags = mobyipvs.ConnectionFlagDirectRoute
			}
			if err := h.NewDestination(svc, md); err != nil {
				t.Fatalf("NewDestination %s → %s: %v", s.addr, d, err)
			}
		}
	}
	for _, s := range append(specs, vsSpec{"10.96.0.99", 80, unix.IPPROTO_TCP, nil}) {
		svc := mobyService(s.addr, s.port, s.proto)
		proto, _ := policy.ProtocolOfNumber(uint8(s.proto))
		key := ipvs.Key{Address: netip.MustParseAddr(s.addr), Protocol: proto, Port: s.port}
		got, err := k.Destinations(key)
		if err != nil {
			t.Fatalf("Destinations %s: %v", key, err)
		}
		var want []ipvs.Destination
		for _, d := range destinations(t, h, svc) {
			a, _ := netip.AddrFromSlice(d.Address)
			want = append(want, ipvs.Destination{Addr: a.Unmap(), Port: d.Port, Weight: int32(d.Weight),
				Forward:     uint16(d.ConnectionFlags & mobyipvs.ConnectionFlagFwdMask),
				ActiveConns: uint32(d.ActiveConnections), InactiveConns: uint32(d.InactiveConnections)})
		}
		byAddr := func(x, y ipvs.Destination) int { return x.AddrPort().Compare(y.AddrPort()) }
		slices.SortFunc(got, byAddr)
		slices.SortFunc(want, byAddr)
		if len(want) != len(s.dests) {
			t.Fatalf("%s: moby/ipvs lists %d destinations, %d were added", key, len(want), len(s.dests))
		}
		if !cmp.Equal(got, want, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
			t.Errorf("%s: Destinations\n%+v\nmoby/ipvs's GetDestinations\n%+v", key, got, want)
		}
		t.Logf("%s: %d destinations read alike", key, len(got))
	}
}
