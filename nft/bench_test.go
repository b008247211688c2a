package nft

import (
	"runtime"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Benchmarks of the periodic resync's CPU cost over the Fake (whose own
// reads and batches are part of the numbers): a Rebuild replaces the
// whole table; a Resync and a Repair with nothing changed read it and
// send nothing. 5000 ClusterIP services with two local destinations each
// (5 elements per service).

func benchResync(b *testing.B, call func(w *Writer) error) {
	plan := manyServices(5000)
	w := New(testConfig, NewFake())
	if err := w.Resync(plan); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := call(w); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRebuild5000(b *testing.B) {
	plan := manyServices(5000)
	benchResync(b, func(w *Writer) error { return w.Rebuild(plan) })
}

func BenchmarkResyncNoChange5000(b *testing.B) {
	plan := manyServices(5000)
	benchResync(b, func(w *Writer) error { return w.Resync(plan) })
}

func BenchmarkRepairNoChange5000(b *testing.B) {
	benchResync(b, func(w *Writer) error { return w.Repair() })
}

// BenchmarkRetainedState10000 reports what a Writer holds once it has
// programmed 10,000 services (5 elements each): the live heap after a
// Resync that adopts a table another Writer programmed (so the Fake's
// own table is not counted), the plan dropped. Its retained-B figure is
// the nftables writer's share of the proxy's RSS (issue 11, target 3).
func BenchmarkRetainedState10000(b *testing.B) {
	f := NewFake()
	if err := New(testConfig, f).Resync(manyServices(10000)); err != nil {
		b.Fatal(err)
	}
	var retained float64
	for b.Loop() {
		b.StopTimer()
		plan := manyServices(10000)
		before := liveHeap()
		b.StartTimer()
		w := New(testConfig, f)
		if err := w.Resync(plan); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		plan = policy.Plan{}
		retained = float64(liveHeap() - before)
		runtime.KeepAlive(w)
		runtime.KeepAlive(plan)
		b.StartTimer()
	}
	b.ReportMetric(retained, "retained-B")
}

// liveHeap is the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
