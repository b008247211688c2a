package proxier

import (
	"runtime/metrics"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestReleaseOnceQuietAfterTheHeapGrew: with ReleaseMemory, the idle
// probe returns the heap to the OS once the loop has been quiet for
// quietBeforeRelease and the resident heap grew by an eighth, and at
// least releaseGrowthMin, since the last release left it.
func TestReleaseOnceQuietAfterTheHeapGrew(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name          string
		off           bool
		quiet         time.Duration
		released, now uint64 // the resident heap after the last release; now
		want          int32
	}{
		{name: "released once quiet after the heap grew by an eighth", quiet: quietBeforeRelease, released: 100 * mib, now: 113 * mib, want: 1},
		{name: "not while the last sync is recent", quiet: quietBeforeRelease - time.Second, released: 100 * mib, now: 200 * mib},
		{name: "not for growth under an eighth", quiet: time.Minute, released: 100 * mib, now: 112 * mib},
		{name: "not again while the heap stays what the release left", quiet: time.Minute, released: 68 * mib, now: 68 * mib},
		{name: "not for growth under the minimum on a small heap", quiet: time.Minute, released: 4 * mib, now: 11 * mib},
		{name: "a small heap grown by the minimum", quiet: time.Minute, released: 4 * mib, now: 12 * mib, want: 1},
		{name: "never without ReleaseMemory", off: true, quiet: time.Minute, released: 4 * mib, now: 400 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxier(t, func(c *Config) { c.ReleaseMemory = !tc.off })
			clk := testingclock.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
			tp.setClock(clk)
			var resident atomic.Uint64
			resident.Store(tc.released)
			tp.residentHeap = resident.Load
			var released atomic.Int32
			tp.freeOSMemory = func() { released.Add(1) }
			settle := func() {
				waitFor(t, "the release to finish", func() bool { return !tp.releasing.Load() })
			}
			baseline(tp)
			tp.syncNow(false) // full: released, the resident heap noted
			settle()
			released.Store(0)
			resident.Store(tc.now)
			clk.Step(tc.quiet)
			tp.releaseIfQuiet()
			settle()
			if got := released.Load(); got != tc.want {
				t.Errorf("%d releases, want %d", got, tc.want)
			}
		})
	}
}

// TestResidentHeapMetricsAreTheRuntimes: every metric residentHeap reads
// is one this Go runtime has (an unknown name would read as nothing).
func TestResidentHeapMetricsAreTheRuntimes(t *testing.T) {
	var names []string
	for _, d := range metrics.All() {
		names = append(names, d.Name)
	}
	for _, n := range residentMetrics {
		if !slices.Contains(names, n) {
			t.Errorf("runtime/metrics has no %s", n)
		}
	}
	if residentHeap() == 0 {
		t.Error("residentHeap: 0")
	}
}
