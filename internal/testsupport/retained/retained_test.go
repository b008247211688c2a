package retained

import (
	"testing"
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
