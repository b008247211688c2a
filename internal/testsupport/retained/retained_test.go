package retained

import (
	"runtime"
	"testing"
	"time"
)

// TestReportCountsWhatIsKeptNotWhatIsDropped: a value keeping 4 MiB
// reports about 4 MiB, whatever its construction allocated and dropped.
func TestReportCountsWhatIsKeptNotWhatIsDropped(t *testing.T) {
	const kept = 4 << 20
	r := testing.Benchmark(func(b *testing.B) {
		Report(b, func() (any, error) {
			_ = make([]byte, 16<<20) // garbage
			return make([]byte, kept), nil
		})
	})
	got := r.Extra["retained-B"]
	if got < kept || got > kept+kept/4 {
		t.Errorf("retained-B = %.0f, want about %d", got, kept)
	}
}

// TestReportPeakSeesWhatIsDroppedAfterwards: a run that holds 32 MiB for
// a moment and keeps nothing reports about 32 MiB.
func TestReportPeakSeesWhatIsDroppedAfterwards(t *testing.T) {
	const held = 32 << 20
	r := testing.Benchmark(func(b *testing.B) {
		ReportPeak(b, func() error {
			buf := make([]byte, held)
			for i := range buf {
				buf[i] = 1
			}
			time.Sleep(20 * time.Millisecond)
			runtime.KeepAlive(buf)
			return nil
		})
	})
	got := r.Extra["peak-live-B"]
	if got < held || got > held+held/4 {
		t.Errorf("peak-live-B = %.0f, want about %d", got, held)
	}
}
