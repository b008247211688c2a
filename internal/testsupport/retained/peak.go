package retained

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// ReportPeak runs run once per benchmark iteration and reports, as the
// metric "peak-live-B", the most heap its objects took at once while it
// ran, over what was live before: the transient state a cold sync holds,
// which with the Go collector's default target is about half of the
// proxy's peak RSS. The collector runs almost continuously meanwhile
// (GOGC 2), so that the heap's objects are close to the live ones, and
// a sampler reads them every 200µs: a peak shorter than that can be
// missed, and run takes many times longer than without.
func ReportPeak(b *testing.B, run func() error) {
	b.Helper()
	var peak uint64
	for b.Loop() {
		p, err := livePeak(run)
		if err != nil {
			b.Fatal(err)
		}
		peak = max(peak, p)
	}
	b.ReportMetric(float64(peak), "peak-live-B")
}

func livePeak(run func() error) (uint64, error) {
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(2))
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(s); return s[0].Value.Uint64() }
	before := read()
	stop, done := make(chan bool), make(chan uint64)
	go func() {
		var most uint64
		for {
			select {
			case <-stop:
				done <- most
				return
			default:
			}
			most = max(most, read())
			time.Sleep(200 * time.Microsecond)
		}
	}()
	err := run()
	close(stop)
	most := <-done
	if most < before {
		return 0, err
	}
	return most - before, err
}
