package proxier

import (
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// TestReleaseOnceQuietAfterTheHeapGrew: with ReleaseMemory, the idle
// probe returns the heap to the OS once the loop has been quiet for
// quietBeforeRelease and the resident heap grew past the last release's
// live heap by a quarter of it and at least releaseGrowthMin.
func TestReleaseOnceQuietAfterTheHeapGrew(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name           string
		off            bool
		quiet          time.Duration
		live, resident uint64 // live at the last release; resident now
		want           int32
	}{
		{name: "released once quiet after the heap grew by a quarter", quiet: quietBeforeRelease, live: 100 * mib, resident: 125 * mib, want: 1},
		{name: "not while the last sync is recent", quiet: quietBeforeRelease - time.Second, live: 100 * mib, resident: 200 * mib},
		{name: "not for growth under a quarter of the live heap", quiet: time.Minute, live: 100 * mib, resident: 124 * mib},
		{name: "not for growth under the minimum on a small heap", quiet: time.Minute, live: 4 * mib, resident: 11 * mib},
		{name: "a small heap grown by the minimum", quiet: time.Minute, live: 4 * mib, resident: 12 * mib, want: 1},
		{name: "never without ReleaseMemory", off: true, quiet: time.Minute, live: 4 * mib, resident: 400 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxier(t, func(c *Config) { c.ReleaseMemory = !tc.off })
			clk := testingclock.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
			tp.setClock(clk)
			var mu sync.Mutex
			sizes := heapSizes{live: tc.live, resident: tc.live}
			tp.heapSizes = func() heapSizes { mu.Lock(); defer mu.Unlock(); return sizes }
			var released atomic.Int32
			tp.freeOSMemory = func() { released.Add(1) }
			settle := func() {
				waitFor(t, "the release to finish", func() bool { return !tp.releasing.Load() })
			}
			baseline(tp)
			tp.syncNow(false) // full: released, the live heap noted
			settle()
			released.Store(0)
			mu.Lock()
			sizes.resident = tc.resident
			mu.Unlock()
			clk.Step(tc.quiet)
			tp.releaseIfQuiet()
			settle()
			if got := released.Load(); got != tc.want {
				t.Errorf("%d releases, want %d", got, tc.want)
			}
		})
	}
}

// TestHeapMetricsAreTheRuntimes: every metric readHeapSizes reads is
// one this Go runtime has (an unknown name reads as zero, which would
// release the heap never or at every quiet probe).
func TestHeapMetricsAreTheRuntimes(t *testing.T) {
	var names []string
	for _, d := range metrics.All() {
		names = append(names, d.Name)
	}
	for _, n := range heapMetrics {
		if !slices.Contains(names, n) {
			t.Errorf("runtime/metrics has no %s", n)
		}
	}
	if h := readHeapSizes(); h.live == 0 || h.resident < h.live {
		t.Errorf("readHeapSizes: %+v, want a live heap within the resident one", h)
	}
}
