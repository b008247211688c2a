package proxier

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/apiconv"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/cputime"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/retained"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nft"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/udpflows"
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

// BenchmarkSyncEndpointChange10000 is one endpoint change through the
// loop, as make bench-scale's churn makes them: the slice converted,
// the service planned, both writers' Applies over the fakes and the UDP
// conntrack reconcile (over an empty fake table), at 10,000 services x
// 10 endpoints, one in ten also with a UDP port. Its cost must not grow
// with the number of services.
func BenchmarkSyncEndpointChange10000(b *testing.B) {
	const n = 10000
	tp := syncedBenchProxier(b, n)
	gen := make([]int, n)
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		i := (k*7919 + 3) % n // every tenth a UDP service, as bench-scale picks them
		k++
		gen[i]++
		tp.slice(benchSlice(i, gen[i]))
		if err := tp.sync(false); err != nil {
			b.Fatal(err)
		}
	}
}

// benchService is bench-scale's service i: http 80/TCP, and every tenth
// also dns 53/UDP.
func benchService(i int) *corev1.Service {
	ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String()
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%10), Name: fmt.Sprintf("svc-%05d", i)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if i%10 == 5 {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(5353)})
	}
	return s
}

// benchSlice is service i's slice of 10 ready endpoints on another
// node, the last one's address set by gen.
func benchSlice(i, gen int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%10), Name: fmt.Sprintf("svc-%05d-1", i),
			Labels: map[string]string{apiconv.LabelServiceName: fmt.Sprintf("svc-%05d", i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	if i%10 == 5 {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](5353)})
	}
	for j := range 10 {
		a := netip.AddrFrom4([4]byte{byte(11 + j), byte(i >> 8), byte(i), 1})
		if j == 9 {
			a = netip.AddrFrom4([4]byte{byte(100 + gen%100), byte(i >> 8), byte(i), byte(2 + gen/100)})
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a.String()}, NodeName: ptr.To("node-b"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// BenchmarkSyncServiceCreateDelete10000 is one service created and
// deleted through the loop, as make bench-scale's service churn makes
// them: the Service, then its EndpointSlice, each synced; then the
// Service deleted and its slice, each synced; both writers' Applies over
// the fakes, at 10,000 services x 10 endpoints. No idle probe
// (DataPlane.Check) between them: the loop probes only once it has not
// synced for its probe interval, and the churn's changes come faster.
func BenchmarkSyncServiceCreateDelete10000(b *testing.B) {
	const n = 10000
	tp := syncedBenchProxier(b, n)
	step := func() {
		if err := tp.sync(false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	reportCPU := cputime.Start(b)
	for b.Loop() {
		svc, slice := benchService(n), benchSlice(n, 0)
		tp.svc(svc)
		step()
		tp.slice(slice)
		step()
		tp.onServiceDelete(svc.Namespace, svc.Name)
		step()
		tp.queued(tp.t.deleteSlice(slice.Namespace, slice.Name))
		step()
	}
	reportCPU()
}

// syncedBenchProxier is a proxy over both writers' fakes and an empty
// UDP conntrack fake, synced once with n services (benchService) and
// their slices (benchSlice).
func syncedBenchProxier(b *testing.B, n int) *testProxier {
	b.Helper()
	dp := newDataPlane(nft.New(nft.Config{}, nft.NewFake()),
		ipvs.New(ipvs.Config{}, ipvs.NewFakeKernel(), ipvs.NewFakeLinks(), ipvs.NewFakeSysctls()))
	dp.ct = udpflows.New(udpflows.NewFakeTable(), clock.RealClock{})
	tp := newTestProxier(b, func(c *Config) { c.DataPlane = dp })
	tp.self(node(testNode, "192.168.0.10", nil))
	for i := range n {
		tp.svc(benchService(i))
		tp.slice(benchSlice(i, 0))
	}
	if err := tp.sync(false); err != nil {
		b.Fatal(err)
	}
	return tp
}
