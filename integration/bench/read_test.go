//go:build integration

package bench

import (
	"testing"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier/ipvs"
)

// readsPerOp is how many virtual servers one iteration reads.
const readsPerOp = 1000

// programmed programs n services' plan into a clean IPVS, cleaned again
// when b ends, and returns the plan.
func programmed(b *testing.B, n int) policy.Plan {
	b.Helper()
	cleanIPVS(b)
	plan := benchPlan(n)
	if err := newIPVSWriter(b).Resync(plan); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cleanIPVS(b) })
	return plan
}

// BenchmarkDestinationsRead lists one virtual server's 10 destinations
// at a time, 1,000 virtual servers programmed: through the proxy's
// Kernel adapter (dumpReader, what a change's drain check and a Repair
// use) and through moby/ipvs's GetDestinations, the same request. It
// reports ns/read.
func BenchmarkDestinationsRead(b *testing.B) {
	plan := programmed(b, 1000)
	check := func(b *testing.B, n int, err error) {
		if err != nil || n != destsPerService {
			b.Fatalf("read %d destinations (err %v), want %d", n, err, destsPerService)
		}
	}
	b.Run("proxy", func(b *testing.B) {
		k, _, _, closeAdapters, err := ipvs.NewLinuxAdapters()
		if err != nil {
			b.Fatal(err)
		}
		defer closeAdapters()
		reads := 0
		for b.Loop() {
			for i := range readsPerOp {
				ds, err := k.Destinations(plan.VirtualServers[i%len(plan.VirtualServers)].Key())
				check(b, len(ds), err)
				reads++
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reads), "ns/read")
	})
	b.Run("moby", func(b *testing.B) {
		h, err := mobyipvs.New("")
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		reads := 0
		for b.Loop() {
			for i := range readsPerOp {
				vs := plan.VirtualServers[i%len(plan.VirtualServers)]
				svc := &mobyipvs.Service{Address: vs.Address.AsSlice(), Port: vs.Port, Protocol: unix.IPPROTO_TCP,
					AddressFamily: unix.AF_INET, Netmask: 0xffffffff}
				ds, err := h.GetDestinations(svc)
				check(b, len(ds), err)
				reads++
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(reads), "ns/read")
	})
}

// BenchmarkVirtualServersRead dumps 1,000 virtual servers: through the
// proxy's Kernel adapter (dumpReader, what a Repair and a Resync start
// with) and through moby/ipvs's GetServices, the same request. Run with
// -benchmem: the difference is mostly what each allocates per dump.
func BenchmarkVirtualServersRead(b *testing.B) {
	plan := programmed(b, 1000)
	check := func(b *testing.B, n int, err error) {
		if err != nil || n != len(plan.VirtualServers) {
			b.Fatalf("read %d virtual servers (err %v), want %d", n, err, len(plan.VirtualServers))
		}
	}
	b.Run("proxy", func(b *testing.B) {
		k, _, _, closeAdapters, err := ipvs.NewLinuxAdapters()
		if err != nil {
			b.Fatal(err)
		}
		defer closeAdapters()
		b.ReportAllocs()
		for b.Loop() {
			vss, err := k.VirtualServers()
			check(b, len(vss), err)
		}
	})
	b.Run("moby", func(b *testing.B) {
		h, err := mobyipvs.New("")
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		b.ReportAllocs()
		for b.Loop() {
			svcs, err := h.GetServices()
			check(b, len(svcs), err)
		}
	})
}
