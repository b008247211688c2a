package apiconv

import (
	"fmt"
	"reflect"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// placed is an endpoint at addr on node in zone; nil leaves the field
// unset.
func placed(addr string, node, zone *string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: node, Zone: zone}
}

// convertBoth converts s and s2 through in, or without an Interner when
// in is nil.
func convertBoth(t *testing.T, in *Interner, s, s2 *discoveryv1.EndpointSlice) (*policy.EndpointSlice, *policy.EndpointSlice) {
	t.Helper()
	got, err := EndpointSliceInterned(s, in)
	if err != nil {
		t.Fatalf("converting %s: %v", s.Name, err)
	}
	got2, err := EndpointSliceInterned(s2, in)
	if err != nil {
		t.Fatalf("converting %s: %v", s2.Name, err)
	}
	return got, got2
}

// TestEndpointSliceInternedSharesPlaces: slices converted through one
// Interner give endpoints on the same node in the same zone one Place,
// and others their own; without an Interner, slices share nothing.
func TestEndpointSliceInternedSharesPlaces(t *testing.T) {
	tests := []struct {
		name                     string
		node, zone, node2, zone2 *string
		interner                 bool
		wantShared               bool
	}{
		{name: "same node and zone share one Place", node: ptr("node-a"), zone: ptr("zone-1"),
			node2: ptr("node-a"), zone2: ptr("zone-1"), interner: true, wantShared: true},
		{name: "same node without a zone shares one Place", node: ptr("node-a"), node2: ptr("node-a"),
			interner: true, wantShared: true},
		{name: "same zone without a node shares one Place", zone: ptr("zone-1"), zone2: ptr("zone-1"),
			interner: true, wantShared: true},
		{name: "a nil zone and an empty one share one Place", node: ptr("node-a"), node2: ptr("node-a"), zone2: ptr(""),
			interner: true, wantShared: true},
		{name: "another node has its own Place", node: ptr("node-a"), zone: ptr("zone-1"),
			node2: ptr("node-b"), zone2: ptr("zone-1"), interner: true},
		{name: "another zone has its own Place", node: ptr("node-a"), zone: ptr("zone-1"),
			node2: ptr("node-a"), zone2: ptr("zone-2"), interner: true},
		{name: "without an Interner slices do not share", node: ptr("node-a"), zone: ptr("zone-1"),
			node2: ptr("node-a"), zone2: ptr("zone-1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var in *Interner
			if tc.interner {
				in = NewInterner()
			}
			s := testSlice(withEndpoints(placed("10.1.0.1", tc.node, tc.zone)))
			s2 := testSlice(withEndpoints(placed("10.1.0.2", tc.node2, tc.zone2)))
			s2.Name = "web-def34"
			got, got2 := convertBoth(t, in, s, s2)
			p, p2 := got.Endpoints[0].Place, got2.Endpoints[0].Place
			if p == nil || p2 == nil {
				t.Fatalf("Places %v, %v: want both set", p, p2)
			}
			if shared := p == p2; shared != tc.wantShared {
				t.Errorf("Places %+v (%p) and %+v (%p) shared = %v, want %v", *p, p, *p2, p2, shared, tc.wantShared)
			}
			for i, ep := range []policy.Endpoint{got.Endpoints[0], got2.Endpoints[0]} {
				node, zone := []*string{tc.node, tc.node2}[i], []*string{tc.zone, tc.zone2}[i]
				if ep.NodeName() != deref(node) || ep.Zone() != deref(zone) {
					t.Errorf("endpoint %d: node/zone %q/%q, want %q/%q", i, ep.NodeName(), ep.Zone(), deref(node), deref(zone))
				}
			}
		})
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestEndpointSliceWithoutNodeOrZoneHasNoPlace: an endpoint with
// neither a node nor a zone (unset or empty) has a nil Place, with or
// without an Interner.
func TestEndpointSliceWithoutNodeOrZoneHasNoPlace(t *testing.T) {
	tests := []struct {
		name       string
		node, zone *string
	}{
		{name: "unset node and zone"},
		{name: "empty node and zone", node: ptr(""), zone: ptr("")},
		{name: "empty node, unset zone", node: ptr("")},
	}
	for _, tc := range tests {
		for _, in := range []*Interner{nil, NewInterner()} {
			t.Run(fmt.Sprintf("%s/interner=%v", tc.name, in != nil), func(t *testing.T) {
				got, err := EndpointSliceInterned(testSlice(withEndpoints(placed("10.1.0.1", tc.node, tc.zone))), in)
				if err != nil {
					t.Fatal(err)
				}
				if p := got.Endpoints[0].Place; p != nil {
					t.Errorf("Place = %+v, want nil", *p)
				}
			})
		}
	}
}

// TestEndpointSliceInternedEqualsEndpointSlice: converting through an
// Interner changes which endpoints share a Place, never what they hold.
func TestEndpointSliceInternedEqualsEndpointSlice(t *testing.T) {
	mixed := testSlice(withEndpoints(placed("10.1.0.1", ptr("node-a"), ptr("zone-1")),
		placed("10.1.0.2", ptr("node-a"), ptr("zone-1")), placed("10.1.0.3", ptr("node-b"), nil),
		placed("10.1.0.4", nil, ptr("zone-2")), placed("10.1.0.5", nil, nil), placed("10.1.0.6", ptr("node-a"), ptr("zone-1"))))
	tests := []struct {
		name string
		s    *discoveryv1.EndpointSlice
	}{
		{name: "a slice as the controller writes it", s: fullSlice()},
		{name: "endpoints on several, one or no node and zone", s: mixed},
		{name: "a trimmed slice", s: NewInterner().TrimEndpointSlice(mixed)},
		{name: "a slice without endpoints", s: testSlice(withEndpoints())},
	}
	in := NewInterner()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := EndpointSlice(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := EndpointSliceInterned(tc.s, in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("through an Interner:\n%+v\nwithout:\n%+v", got, want)
			}
		})
	}
}

// TestInternerCountsPlacesInItsBound: Places count toward maxInterned
// like strings and hints, and a full Interner starts afresh; a Place it
// handed out before stays as it was.
func TestInternerCountsPlacesInItsBound(t *testing.T) {
	in := NewInterner()
	first := in.Place("node-a", "zone-1")
	for i := range maxInterned {
		in.Place(fmt.Sprint("n-", i), "zone-1")
	}
	if n := len(in.strs) + len(in.hints) + len(in.places); n > maxInterned {
		t.Fatalf("%d strings, hints and places interned, want at most %d", n, maxInterned)
	}
	if *first != (policy.Place{NodeName: "node-a", Zone: "zone-1"}) {
		t.Errorf("a Place handed out before the reset changed to %+v", *first)
	}
	again := in.Place("node-a", "zone-1")
	if again != in.Place("node-a", "zone-1") {
		t.Errorf("after the reset, equal Places are no longer shared")
	}
	if _, ok := in.places[policy.Place{NodeName: "n-0", Zone: "zone-1"}]; ok {
		t.Errorf("the first Places are still interned after the table filled")
	}
}
