package proxier

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/retained"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// scalePlan is n ClusterIP services in ten namespaces, 10 destinations
// each: bench-scale's workload as the engine plans it, less its UDP
// ports and NodePorts.
func scalePlan(n int) policy.Plan {
	var vss []policy.VirtualServer
	for i := range n {
		v := policy.VirtualServer{Service: policy.ServiceKey{Namespace: fmt.Sprintf("ns-%d", i%10), Name: fmt.Sprintf("svc-%d", i)},
			PortName: "http", Kind: policy.KindClusterIP, Address: netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)}), Port: 80,
			Protocol: policy.ProtocolTCP, Scheduler: "rr", TrafficPolicy: policy.PolicyCluster, Masquerade: policy.MasqueradeOffCluster}
		for j := range 10 {
			v.Destinations = append(v.Destinations, policy.Destination{Address: netip.AddrFrom4([4]byte{10, byte(200 + j), byte(i >> 8), byte(i)}),
				Port: 8080, Weight: 1})
		}
		vss = append(vss, v)
	}
	policy.SortVirtualServers(vss)
	return policy.Plan{Node: "node-a", VirtualServers: vss}
}

// BenchmarkDataPlaneColdResyncPeak10000 reports the most heap the first
// sync's Resync holds at once at 10,000 services x 10 destinations
// (retained.ReportPeak), over the fakes, whose tables are part of it:
// both writers as the proxy runs them, and each alone, to tell which
// one the data plane's share of the proxy's peak is.
func BenchmarkDataPlaneColdResyncPeak10000(b *testing.B) {
	plan := scalePlan(10000)
	newIPVS := func() *ipvs.Writer {
		return ipvs.New(ipvs.Config{}, ipvs.NewFakeKernel(), ipvs.NewFakeLinks(), ipvs.NewFakeSysctls())
	}
	for _, tc := range []struct {
		name   string
		resync func() error
	}{
		{"writers", func() error { return newDataPlane(nft.New(nft.Config{}, nft.NewFake()), newIPVS()).Resync(plan) }},
		{"nftables", func() error { return nft.New(nft.Config{}, nft.NewFake()).Resync(plan) }},
		{"ipvs", func() error { return newIPVS().Resync(plan) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			retained.ReportPeak(b, tc.resync)
		})
	}
}
