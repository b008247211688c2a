package nft

import "testing"

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
