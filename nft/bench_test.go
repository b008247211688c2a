package nft

import (
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testsupport/retained"
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
// programmed 10,000 services (5 elements each): a Resync that adopts a
// table another Writer programmed (so the Fake's own table is not
// counted). Its retained-B figure is the nftables writer's share of the
// proxy's RSS (benchmarks/NOTES.md, memory).
func BenchmarkRetainedState10000(b *testing.B) {
	f := NewFake()
	if err := New(testConfig, f).Resync(manyServices(10000)); err != nil {
		b.Fatal(err)
	}
	retained.Report(b, func() (any, error) {
		w := New(testConfig, f)
		return w, w.Resync(manyServices(10000))
	})
}
