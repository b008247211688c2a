package ipvs

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// costService is one Service with ports × externalIPs virtual servers
// (and ports ClusterIP ones), each with dests destinations.
func costService(ports, externalIPs, dests int) (*policy.Service, *policy.EndpointSlice) {
	svc := &policy.Service{Key: policy.ServiceKey{Namespace: "cost", Name: "wide"},
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	sl := &policy.EndpointSlice{Name: "wide-1", Service: svc.Key, IPv4: true}
	for i := range dests {
		sl.Endpoints = append(sl.Endpoints, policy.Endpoint{Address: netip.AddrFrom4([4]byte{10, 244, 1, byte(5 + i)}), Ready: true, Serving: true})
	}
	for i := range ports {
		name := fmt.Sprintf("p%d", i)
		svc.Ports = append(svc.Ports, policy.ServicePort{Name: name, Protocol: policy.ProtocolUDP, Port: uint16(10000 + i)})
		sl.Ports = append(sl.Ports, policy.EndpointPort{Name: name, Protocol: policy.ProtocolUDP, Port: uint16(20000 + i)})
	}
	for i := range externalIPs {
		svc.ExternalIPs = append(svc.ExternalIPs, netip.AddrFrom4([4]byte{203, 0, byte(113 + i/256), byte(i)}))
	}
	return svc, sl
}

// BenchmarkVirtualServerCost reports what one virtual server costs the
// proxy's heap, per part, in bytes: the engine's index (its claims), the
// computed plan, and the IPVS writer's mirror, for a Service of 100 UDP
// ports × 100 external IPs (10,100 virtual servers) with one and with ten
// destinations each, measured as the live heap each keeps after full
// collections.
// The fake kernel's own table is not counted: another Writer programs it
// first, and the measured one adopts it. The nftables writer's sets,
// which hold each bound address once and each port once, are not
// counted. README (the per-Service budget) cites the figures.
func BenchmarkVirtualServerCost(b *testing.B) {
	for _, dests := range []int{1, 10} {
		b.Run(fmt.Sprintf("destinations=%d", dests), func(b *testing.B) { virtualServerCost(b, dests) })
	}
}

func virtualServerCost(b *testing.B, dests int) {
	svc, sl := costService(100, 100, dests)
	e, err := policy.New(policy.Config{NodeName: "node-a"})
	if err != nil {
		b.Fatal(err)
	}
	e.UpsertService(svc)
	e.UpsertEndpointSlice(sl)
	plan, _ := e.Compute()
	n := float64(len(plan.VirtualServers))
	k, l, sys := NewFakeKernel(), NewFakeLinks(), NewFakeSysctls()
	if err := New(Config{Now: time.Now}, k, l, sys).Resync(plan); err != nil {
		b.Fatal(err)
	}
	var engineB, planB, writerB uint64
	for b.Loop() {
		base := liveHeap()
		e, err := policy.New(policy.Config{NodeName: "node-a"})
		if err != nil {
			b.Fatal(err)
		}
		e.UpsertService(svc)
		e.UpsertEndpointSlice(sl)
		afterEngine := liveHeap()
		plan, _ := e.Compute()
		afterPlan := liveHeap()
		w := New(Config{Now: time.Now}, k, l, sys)
		if err := w.Resync(plan); err != nil {
			b.Fatal(err)
		}
		afterWriter := liveHeap()
		runtime.KeepAlive(e)
		runtime.KeepAlive(plan)
		runtime.KeepAlive(w)
		engineB, planB, writerB = afterEngine-base, afterPlan-afterEngine, afterWriter-afterPlan
	}
	b.ReportMetric(float64(engineB)/n, "engine-B/vs")
	b.ReportMetric(float64(planB)/n, "plan-B/vs")
	b.ReportMetric(float64(writerB)/n, "writer-B/vs")
	b.ReportMetric(float64(engineB+planB+writerB)/n, "B/vs")
}

// liveHeap is the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
