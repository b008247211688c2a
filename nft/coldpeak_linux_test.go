package nft

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkColdResyncPeakLinux10000 reports the most heap a first Resync
// of 10,000 ClusterIP services (5 elements each) holds at once on the
// running kernel, in a network namespace of its own ("peak-live-B"): the
// mirror it keeps and the batch of the whole table google/nftables holds
// until Flush, which the Fake's figures do not show. With
// KIP_PEAK_HEAP_PROFILE=file it writes there the heap profile taken
// nearest the peak.
func BenchmarkColdResyncPeakLinux10000(b *testing.B) {
	plan := manyServices(10000)
	var peak uint64
	var prof bytes.Buffer
	for b.Loop() {
		ns := newTestNetns(b)
		var err error
		var most, before, profiled uint64
		done := make(chan struct{})
		runtime.GC()
		old := debug.SetGCPercent(2)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		read := func() uint64 { metrics.Read(s); return s[0].Value.Uint64() }
		before = read()
		go func() {
			defer close(done)
			runtime.LockOSThread()
			if err = unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
				return
			}
			var w *Writer
			if w, err = NewLinux(testConfig); err == nil {
				err = w.Resync(plan)
			}
		}()
	loop:
		for {
			select {
			case <-done:
				break loop
			default:
			}
			if h := read(); h > most {
				most = h
				if most > profiled+1<<20 {
					profiled = most
					prof.Reset()
					if err := pprof.Lookup("heap").WriteTo(&prof, 0); err != nil {
						b.Fatal(err)
					}
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
		debug.SetGCPercent(old)
		if err != nil {
			b.Fatal(err)
		}
		peak = max(peak, most-before)
	}
	b.ReportMetric(float64(peak), "peak-live-B")
	if path := os.Getenv("KIP_PEAK_HEAP_PROFILE"); path != "" {
		if err := os.WriteFile(path, prof.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
