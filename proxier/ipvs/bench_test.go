package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/plantest"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/retained"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// scalePlan is n ClusterIP services with 10 destinations each.
func scalePlan(n int) policy.Plan {
	var vss []policy.VirtualServer
	for i := range n {
		v := policy.VirtualServer{Service: policy.ServiceKey{Namespace: "scale", Name: fmt.Sprintf("svc-%d", i)}, Kind: policy.KindClusterIP,
			Address: netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)}), Port: 80, Protocol: policy.ProtocolTCP, Scheduler: "rr"}
		for j := range 10 {
			v.Destinations = append(v.Destinations, policy.Destination{Address: netip.AddrFrom4([4]byte{10, byte(200 + j), byte(i >> 8), byte(i)}),
				Port: 8080, Weight: 1})
		}
		vss = append(vss, v)
	}
	policy.SortVirtualServers(vss)
	return policy.Plan{VirtualServers: vss}
}

// Benchmarks of the periodic resync's CPU cost over the fakes (whose
// reads are part of the numbers) at 5000 services x 10 destinations, with
// nothing changed: a Resync of the plan, and a Repair without one.
func benchNoChange(b *testing.B, call func(w *Writer) error) {
	w := New(Config{Now: time.Now}, NewFakeKernel(), NewFakeLinks(), NewFakeSysctls())
	if err := w.Resync(scalePlan(5000)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := call(w); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResyncNoChange5000(b *testing.B) {
	plan := scalePlan(5000)
	benchNoChange(b, func(w *Writer) error { return w.Resync(plan) })
}

func BenchmarkRepairNoChange5000(b *testing.B) {
	benchNoChange(b, func(w *Writer) error { return w.Repair() })
}

// BenchmarkRetainedState10000 reports what a Writer holds once it has
// programmed 10,000 services x 10 destinations: a Resync that adopts a
// kernel another Writer programmed (so the fake kernel's own table is not
// counted). Its retained-B figure is the Writer's share of the proxy's
// RSS (benchmarks/NOTES.md, memory).
func BenchmarkRetainedState10000(b *testing.B) {
	k, l, sys := NewFakeKernel(), NewFakeLinks(), NewFakeSysctls()
	if err := New(Config{Now: time.Now}, k, l, sys).Resync(scalePlan(10000)); err != nil {
		b.Fatal(err)
	}
	retained.Report(b, func() (any, error) {
		w := New(Config{Now: time.Now}, k, l, sys)
		return w, w.Resync(scalePlan(10000))
	})
}

// BenchmarkColdResync10000 times the proxy's first sync at 10,000
// services x 10 destinations, a Resync of the whole plan into an empty
// kernel (the fake's, whose work is part of the time), with the
// collector at its default target, as the proxy runs it.
func BenchmarkColdResync10000(b *testing.B) {
	plan := scalePlan(10000)
	b.ReportAllocs()
	for b.Loop() {
		if err := New(Config{Now: time.Now}, NewFakeKernel(), NewFakeLinks(), NewFakeSysctls()).Resync(plan); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdResyncPeak10000 reports the most heap a cold Resync of
// 10,000 services x 10 destinations holds at once, over the fakes (whose
// table is part of it): what the first sync adds to the proxy's peak RSS
// (benchmarks/NOTES.md, memory).
func BenchmarkColdResyncPeak10000(b *testing.B) {
	plan := scalePlan(10000)
	retained.ReportPeak(b, func() error {
		return New(Config{Now: time.Now}, NewFakeKernel(), NewFakeLinks(), NewFakeSysctls()).Resync(plan)
	})
}

// BenchmarkColdResyncWriterPeak10000 is BenchmarkColdResyncPeak10000 over
// a kernel that keeps nothing (discardKernel): the heap the Writer alone
// holds at once in a cold start, as on a node, where the table is the
// kernel's memory and not the proxy's.
func BenchmarkColdResyncWriterPeak10000(b *testing.B) {
	plan := scalePlan(10000)
	retained.ReportPeak(b, func() error {
		return New(Config{Now: time.Now}, discardKernel{NewFakeKernel()}, NewFakeLinks(), NewFakeSysctls()).Resync(plan)
	})
}

// discardKernel is an empty kernel that accepts every change and keeps
// none of them.
type discardKernel struct{ Kernel }

func (discardKernel) Write(ops []Op) []error { return make([]error, len(ops)) }

// BenchmarkApplyEndpointChange10000 is one Apply replacing one
// destination of one service, 10,000 services x 10 destinations
// programmed: its cost must not grow with the table.
func BenchmarkApplyEndpointChange10000(b *testing.B) {
	plan := scalePlan(10000)
	w := New(Config{Now: time.Now}, NewFakeKernel(), NewFakeLinks(), NewFakeSysctls())
	if err := w.Resync(plan); err != nil {
		b.Fatal(err)
	}
	sp := plantest.Groups(plan)[5000]
	vss := sp.VirtualServers
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		changed := slices.Clone(vss)
		changed[0].Destinations = slices.Clone(vss[0].Destinations)
		changed[0].Destinations[0].Address = netip.AddrFrom4([4]byte{10, 250, byte(i >> 8), byte(i)})
		changed[0].Destinations[0].Weight = 1
		i++
		if err := w.Apply([]policy.ServicePlan{{Service: sp.Service, VirtualServers: changed}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyCreateDelete10000 is a service created and then deleted,
// two Applies, 10,000 services x 10 destinations programmed.
func BenchmarkApplyCreateDelete10000(b *testing.B) {
	w := New(Config{Now: time.Now}, NewFakeKernel(), NewFakeLinks(), NewFakeSysctls())
	if err := w.Resync(scalePlan(10000)); err != nil {
		b.Fatal(err)
	}
	extra := scalePlan(10001).VirtualServers
	var v policy.VirtualServer
	for _, x := range extra {
		if x.Service.Name == "svc-10000" {
			v = x
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Apply([]policy.ServicePlan{{Service: v.Service, VirtualServers: []policy.VirtualServer{v}}}); err != nil {
			b.Fatal(err)
		}
		if err := w.Apply([]policy.ServicePlan{{Service: v.Service}}); err != nil {
			b.Fatal(err)
		}
	}
}
