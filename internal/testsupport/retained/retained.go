package retained

import (
	"runtime"
	"testing"
)

// Report runs build once per benchmark iteration (timed) and reports the
// live heap the value it returns keeps, in bytes, as the metric
// "retained-B". What build allocates and drops is not counted.
func Report(b *testing.B, build func() (any, error)) {
	b.Helper()
	var kept uint64
	for b.Loop() {
		b.StopTimer()
		before := liveHeap()
		b.StartTimer()
		v, err := build()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		kept = liveHeap() - before
		runtime.KeepAlive(v)
		b.StartTimer()
	}
	b.ReportMetric(float64(kept), "retained-B")
}

// liveHeap is the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
