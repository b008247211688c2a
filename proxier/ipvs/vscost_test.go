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
// (and ports ClusterIP ones), each with one destination.
func costService(ports, externalIPs int) (*policy.Service, *policy.EndpointSlice) {
	svc := &policy.Service{Key: policy.ServiceKey{Namespace: "cost", Name: "wide"},
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	sl := &policy.EndpointSlice{Name: "wide-1", Service: svc.Key, IPv4: true,
		Endpoints: []policy.Endpoint{{Address: netip.MustParseAddr("10.244.1.5"), Ready: true, Serving: true}}}
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

// engineWith loads one Service into a new engine and computes its plan.
func engineWith(b *testing.B, svc *policy.Service, sl *policy.EndpointSlice) (*policy.Engine, policy.Plan) {
	e, err := policy.New(policy.Config{NodeName: "node-a"})
	if err != nil {
		b.Fatal(err)
	}
	e.UpsertService(svc)
	e.UpsertEndpointSlice(sl)
	plan, _ := e.Compute()
	return e, plan
}

// BenchmarkVirtualServerCost reports what one virtual server (with one
// destination) costs the proxy's heap, per part, in bytes: the engine's
// index (its claims), the computed plan, and the IPVS writer's mirror,
// for a Service of 100 UDP ports × 100 external IPs (10,100 virtual
// servers), measured as the live heap each keeps after full collections.
// The fake kernel's own table is not counted: another Writer programs it
// first, and the measured one adopts it. The nftables writer's sets,
// which hold each bound address once and each port once, are not
// counted. README (the per-Service budget) cites the figures.
func BenchmarkVirtualServerCost(b *testing.B) {
	svc, sl := costService(100, 100)
	_, plan := engineWith(b, svc, sl)
	n := float64(len(plan.VirtualServers))
	k, l, ct, sys := NewFakeKernel(), NewFakeLinks(), NewFakeConntrack(), NewFakeSysctls()
	if err := New(Config{Now: time.Now}, k, l, ct, sys).Resync(plan); err != nil {
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
		w := New(Config{Now: time.Now}, k, l, ct, sys)
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
