package policy

import (
	"fmt"
	"net/netip"
	"testing"
)

// FuzzCompute drives the engine with arbitrary endpoints, conditions,
// hints and annotations, and checks the plan's invariants.
func FuzzCompute(f *testing.F) {
	f.Add([]byte{0x01, 0x13, 0x25, 0x37, 0x49, 0x5b}, "PreferLocal", "", "1.4", "rr", "", uint8(0))
	f.Add([]byte{0xff, 0x00, 0x7f, 0x80}, "PreferZone", "", "", "lc", "", uint8(1))
	f.Add([]byte{0x10, 0x21, 0x32}, "", "kubernetes.io/hostname,topology.kubernetes.io/zone,*", "2", "mh", "mh-port,mh-fallback", uint8(2))
	f.Add([]byte{0x03, 0x03, 0x03, 0x03}, "", "topology.kubernetes.io/zone", "100", "bogus", "x", uint8(3))
	f.Add([]byte{}, "Local", "*,a", "abc", "", ",,", uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, trafficPolicy, keys, factor, scheduler, flags string, mode uint8) {
		s := svc("web", annotate(AnnotationTrafficPolicy, trafficPolicy, AnnotationTopologyKeys, keys,
			AnnotationOverprovision, factor, AnnotationScheduler, scheduler, AnnotationSchedulerFlags, flags))
		s.InternalLocal = mode&1 != 0
		s.ExternalLocal = mode&2 != 0
		s.Ports[0].NodePort = 30080
		nodeNames := []string{thisNode, "node-b", "node-c", ""}
		zoneNames := []string{thisZone, "zone-b", "", "zone-c"}
		// Two slices; each byte is one endpoint: bits 0-1 node, 2-3 zone,
		// 4 ready, 5 serving, 6 terminating, 7 hinted for this zone/node.
		var sl [2]*EndpointSlice
		sl[0], sl[1] = slice("web", "web-a"), slice("web", "web-b")
		known := map[netip.Addr]bool{}
		for i, b := range data {
			e := Endpoint{
				Address: netip.AddrFrom4([4]byte{10, 0, byte(i % 7), b % 5}),
				Place:   at(nodeNames[b&3], zoneNames[b>>2&3]),
				Ready:   b&16 != 0, Serving: b&32 != 0, Terminating: b&64 != 0,
			}
			if b&128 != 0 {
				e.Hints = &Hints{ForZones: []string{zoneNames[b>>2&3]}, ForNodes: []string{nodeNames[b&3]}}
			}
			known[e.Address] = true
			sl[i%2].Endpoints = append(sl[i%2].Endpoints, e)
		}
		e, _ := newEngine(t, world{
			nodes: []*Node{node(thisNode, zoneNames[mode>>2&3], "192.168.0.1"), node("node-b", "zone-b"), node("node-c", thisZone)},
			svcs:  []*Service{s}, slices: sl[:],
		})
		plan, _ := e.Compute()
		one, ok := e.ComputeService(s.Key)
		if !ok || len(one.VirtualServers) != len(plan.VirtualServers) {
			t.Fatalf("ComputeService has %d virtual servers, Compute %d", len(one.VirtualServers), len(plan.VirtualServers))
		}
		for i, vs := range plan.VirtualServers {
			if i > 0 && plan.VirtualServers[i-1].Key().Compare(vs.Key()) >= 0 {
				t.Fatalf("plan not sorted or not unique at %d: %s", i, vs.Key())
			}
			if !IsScheduler(vs.Scheduler) || vs.Reason == "" {
				t.Fatalf("%s: scheduler %q reason %q", vs.Key(), vs.Scheduler, vs.Reason)
			}
			checkDestinations(t, vs, known)
		}
	})
}

func checkDestinations(t *testing.T, vs VirtualServer, known map[netip.Addr]bool) {
	t.Helper()
	for j, d := range vs.Destinations {
		if !known[d.Address] || d.Port != 8080 || d.Weight < 1 || d.Weight > spillScale {
			t.Fatalf("%s: bad destination %+v", vs.Key(), d)
		}
		if j > 0 && compareDestinations(vs.Destinations[j-1], d) >= 0 {
			t.Fatalf("%s: destinations not sorted or not unique: %s", vs.Key(), fmt.Sprint(vs.Destinations))
		}
	}
}
