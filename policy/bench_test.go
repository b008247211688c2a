package policy

import (
	"fmt"
	"net/netip"
	"testing"
)

// Benchmark scale from the issue: 10k services, 100k endpoints, 1000
// nodes, 3 zones.
const (
	benchServices = 10000
	benchPerSvc   = 10
	benchNodes    = 1000
	benchZones    = 3
)

// benchCluster builds a cluster in which services mix the policies seen
// in practice: half use zone hints, and of the rest a fifth each are
// NodePort, PreferLocal, topology keys with spill, iTP=Local and plain.
func benchCluster(tb testing.TB) (*Engine, []ServiceKey) {
	tb.Helper()
	zone := func(i int) string { return fmt.Sprintf("zone-%d", i%benchZones) }
	nodeName := func(i int) string { return fmt.Sprintf("node-%04d", i%benchNodes) }
	// Endpoints on one node and zone share a Place, as apiconv's
	// Interner makes them.
	places := map[Place]*Place{}
	placeOf := func(i int) *Place {
		k := Place{NodeName: nodeName(i), Zone: zone(i)}
		if places[k] == nil {
			places[k] = &k
		}
		return places[k]
	}
	e, err := New(Config{NodeName: nodeName(0)})
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < benchNodes; i++ {
		e.UpsertNode(&Node{Name: nodeName(i),
			Labels:      map[string]string{"kubernetes.io/hostname": nodeName(i), LabelTopologyZone: zone(i)},
			InternalIPs: []netip.Addr{netip.AddrFrom4([4]byte{192, 168, byte(i >> 8), byte(i)})}})
	}
	keys := make([]ServiceKey, 0, benchServices)
	for i := 0; i < benchServices; i++ {
		s := &Service{
			Key:        ServiceKey{fmt.Sprintf("ns-%d", i%100), fmt.Sprintf("svc-%d", i)},
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})},
			Ports:      []ServicePort{{Name: "http", Protocol: ProtocolTCP, Port: 80}},
		}
		hints := i%2 == 0
		switch i % 10 {
		case 1:
			s.Ports[0].NodePort = uint16(30000 + i/10) // unique, as the apiserver allocates them
		case 3:
			s.Annotations = map[string]string{AnnotationTrafficPolicy: "PreferLocal"}
		case 5:
			s.Annotations = map[string]string{AnnotationTopologyKeys: "kubernetes.io/hostname,topology.kubernetes.io/zone,*", AnnotationOverprovision: "1.4"}
		case 7:
			s.InternalLocal = true
		}
		e.UpsertService(s)
		sl := &EndpointSlice{Name: s.Key.Name + "-abcde", Service: s.Key, IPv4: true,
			Ports: []EndpointPort{{Name: "http", Protocol: ProtocolTCP, Port: 8080}}}
		for j := 0; j < benchPerSvc; j++ {
			n := i*7 + j*13
			ep := Endpoint{Address: netip.AddrFrom4([4]byte{10, byte(64 + j), byte(i >> 8), byte(i)}),
				Ready: j != 3, Serving: j != 3, Place: placeOf(n)}
			if hints {
				ep.Hints = &Hints{ForZones: []string{zone(n)}}
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		e.UpsertEndpointSlice(sl)
		keys = append(keys, s.Key)
	}
	return e, keys
}

// BenchmarkCompute is a full compute of the whole cluster (target < 100 ms).
func BenchmarkCompute(b *testing.B) {
	e, _ := benchCluster(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		plan, _ := e.Compute()
		if len(plan.VirtualServers) < benchServices {
			b.Fatalf("plan has %d virtual servers", len(plan.VirtualServers))
		}
	}
}

// BenchmarkComputeService recomputes one service at full scale
// (target < 50 µs). It cycles through services of every policy.
func BenchmarkComputeService(b *testing.B) {
	e, keys := benchCluster(b)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, ok := e.ComputeService(keys[i%len(keys)]); !ok {
			b.Fatal("service missing")
		}
		i++
	}
}

// BenchmarkUpsertEndpointSliceAndRecompute is the control plane's path for
// one endpoint change: replace a slice, recompute its service.
func BenchmarkUpsertEndpointSliceAndRecompute(b *testing.B) {
	e, keys := benchCluster(b)
	slices := make([]*EndpointSlice, len(keys))
	for i, k := range keys {
		slices[i] = e.slices[k][0]
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		for _, k := range e.UpsertEndpointSlice(slices[i%len(slices)]) {
			e.ComputeService(k)
		}
		i++
	}
}
