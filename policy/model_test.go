package policy

import (
	"runtime"
	"testing"
	"unsafe"
)

// TestEndpointIs48Bytes: an endpoint's node and zone are one shared
// pointer and its hints another, so an Endpoint is 48 bytes on amd64
// (72 with the node and zone strings inline; benchmarks/NOTES.md, memory).
func TestEndpointIs48Bytes(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("sizes are pinned on amd64, not %s", runtime.GOARCH)
	}
	if got := unsafe.Sizeof(Endpoint{}); got != 48 {
		t.Errorf("unsafe.Sizeof(Endpoint{}) = %d, want 48", got)
	}
}

// TestEndpointWithoutPlaceHasNoNodeOrZone: NodeName and Zone read the
// Place, and are empty without one.
func TestEndpointWithoutPlaceHasNoNodeOrZone(t *testing.T) {
	tests := []struct {
		name               string
		place              *Place
		wantNode, wantZone string
	}{
		{name: "no Place: no node, no zone"},
		{name: "a Place gives its node and zone", place: &Place{NodeName: "node-a", Zone: "zone-1"},
			wantNode: "node-a", wantZone: "zone-1"},
		{name: "a Place with only a zone has no node", place: &Place{Zone: "zone-1"}, wantZone: "zone-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := Endpoint{Place: tc.place}
			if e.NodeName() != tc.wantNode || e.Zone() != tc.wantZone {
				t.Errorf("NodeName, Zone = %q, %q; want %q, %q", e.NodeName(), e.Zone(), tc.wantNode, tc.wantZone)
			}
		})
	}
}
