package proxier

import (
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// TestReleaseOnceQuietAfterSyncsOrASixteenthAllocated: with
// ReleaseMemory, the idle probe returns the heap to the OS once the loop
// has been quiet for quietBeforeRelease and the proxy allocated, since
// the last release, releaseGrowthMin if the loop synced since, else a
// sixteenth of the resident heap the last release left (and at least
// releaseGrowthMin): whether or not the heap grew meanwhile.
func TestReleaseOnceQuietAfterSyncsOrASixteenthAllocated(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name      string
		off       bool
		quiet     time.Duration
		resident  uint64 // the resident heap the last release left
		allocated uint64 // bytes allocated since the last release
		synced    bool   // an incremental sync since the last release
		want      int32
	}{
		{name: "released once quiet after a sixteenth was allocated", quiet: quietBeforeRelease, resident: 100 * mib, allocated: 7 * mib, want: 1},
		{name: "not while the last sync is recent", quiet: quietBeforeRelease - time.Second, resident: 100 * mib, allocated: 200 * mib},
		{name: "not for less than a sixteenth", quiet: time.Minute, resident: 100 * mib, allocated: 6 * mib},
		{name: "not again when nothing was allocated since", quiet: time.Minute, resident: 68 * mib},
		{name: "not for less than the minimum on a small heap", quiet: time.Minute, resident: 4 * mib, allocated: 3 * mib},
		{name: "a small heap after the minimum", quiet: time.Minute, resident: 4 * mib, allocated: 4 * mib, want: 1},
		{name: "after a sync, released once quiet after the minimum", synced: true, quiet: quietBeforeRelease, resident: 100 * mib, allocated: 4 * mib, want: 1},
		{name: "after a sync, not for less than the minimum", synced: true, quiet: time.Minute, resident: 100 * mib, allocated: 3 * mib},
		{name: "after a sync, not while it is recent", synced: true, quiet: quietBeforeRelease - time.Second, resident: 100 * mib, allocated: 200 * mib},
		{name: "never without ReleaseMemory", off: true, quiet: time.Minute, resident: 4 * mib, allocated: 400 * mib},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxier(t, func(c *Config) { c.ReleaseMemory = !tc.off })
			clk := testingclock.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
			tp.setClock(clk)
			const before = 1 << 30 // allocated before the last release
			var allocated atomic.Uint64
			allocated.Store(before)
			tp.residentHeap = func() uint64 { return tc.resident }
			tp.heapAllocated = allocated.Load
			var released atomic.Int32
			tp.freeOSMemory = func() { released.Add(1) }
			settle := func() {
				waitFor(t, "the release to finish", func() bool { return !tp.releasing.Load() })
			}
			baseline(tp)
			tp.syncNow(false) // full: released, the heap noted
			settle()
			released.Store(0)
			if tc.synced {
				clk.Step(time.Second)
				tp.slice(slice("web-1", "web", ep{"10.244.1.5", testNode}, ep{"10.244.1.6", testNode}))
				tp.syncNow(false) // incremental: no release of its own
				settle()
				if got := released.Load(); got != 0 {
					t.Fatalf("an incremental sync released the heap %d times", got)
				}
			}
			allocated.Store(before + tc.allocated)
			clk.Step(tc.quiet)
			tp.releaseIfQuiet()
			settle()
			if got := released.Load(); got != tc.want {
				t.Errorf("%d releases, want %d", got, tc.want)
			}
		})
	}
}

// TestFullSyncRunsTheCollectorAtAQuarter: with ReleaseMemory, a full
// sync runs the collector at fullSyncGCPercent while the data plane
// resyncs, and the process's own GOGC comes back after it; an
// incremental sync leaves it alone, and so does a process that runs the
// collector off or tighter, or a proxy without ReleaseMemory.
func TestFullSyncRunsTheCollectorAtAQuarter(t *testing.T) {
	tests := []struct {
		name        string
		off         bool // no ReleaseMemory
		process     int  // the process's GOGC
		wantInSync  int
		incremental bool // the sync looked at is incremental
	}{
		{name: "a full sync at a quarter", process: 100, wantInSync: fullSyncGCPercent},
		{name: "a looser GOGC tightened too", process: 400, wantInSync: fullSyncGCPercent},
		{name: "the collector off stays off", process: -1, wantInSync: -1},
		{name: "a tighter GOGC kept", process: 10, wantInSync: 10},
		{name: "never without ReleaseMemory", off: true, process: 100, wantInSync: 100},
		{name: "an incremental sync keeps the process's", process: 100, incremental: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxier(t, func(c *Config) { c.ReleaseMemory = !tc.off })
			tp.freeOSMemory = func() {}
			gogc := tc.process
			var sets int
			tp.setGCPercent = func(v int) int {
				sets++
				old := gogc
				gogc = v
				return old
			}
			inSync := []int{}
			tp.dp.onResync = func() { inSync = append(inSync, gogc) }
			baseline(tp)
			tp.syncNow(false)
			if tc.incremental {
				sets, inSync = 0, nil
				tp.slice(slice("web-1", "web", ep{"10.244.1.5", testNode}, ep{"10.244.1.6", testNode}))
				tp.syncNow(false)
				if sets != 0 || len(inSync) != 0 || gogc != tc.process {
					t.Errorf("an incremental sync set GOGC %d times (now %d), resynced %d times", sets, gogc, len(inSync))
				}
				return
			}
			if !slices.Equal(inSync, []int{tc.wantInSync}) {
				t.Errorf("GOGC in the Resync %v, want [%d]", inSync, tc.wantInSync)
			}
			if gogc != tc.process {
				t.Errorf("GOGC %d after the sync, want the process's %d back", gogc, tc.process)
			}
			waitFor(t, "the release to finish", func() bool { return !tp.releasing.Load() })
		})
	}
}

// TestInformersListAtHalf: with ReleaseMemory, the informers' first
// lists of Services and EndpointSlices run with the collector at
// listGCPercent, and the process's own GOGC is back once the first sync
// is done; a process that runs the collector off or tighter keeps its
// own, and so does a proxy without ReleaseMemory.
func TestInformersListAtHalf(t *testing.T) {
	tests := []struct {
		name     string
		off      bool // no ReleaseMemory
		process  int  // the process's GOGC
		wantList int
	}{
		{name: "the lists at half", process: 100, wantList: listGCPercent},
		{name: "a looser GOGC tightened too", process: 400, wantList: listGCPercent},
		{name: "the collector off stays off", process: -1, wantList: -1},
		{name: "a tighter GOGC kept", process: 30, wantList: 30},
		{name: "never without ReleaseMemory", off: true, process: 100, wantList: 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProxier(t, func(c *Config) { c.ReleaseMemory = !tc.off },
				service("web", "10.96.0.10"), slice("web-1", "web", ep{"10.244.1.5", testNode}))
			tp.freeOSMemory = func() {}
			var mu sync.Mutex
			gogc := tc.process
			tp.setGCPercent = func(v int) int {
				mu.Lock()
				defer mu.Unlock()
				old := gogc
				gogc = v
				return old
			}
			atList := map[string][]int{}
			for _, resource := range []string{"services", "endpointslices"} {
				tp.client.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
					mu.Lock()
					defer mu.Unlock()
					atList[resource] = append(atList[resource], gogc)
					return false, nil, nil
				})
			}
			tp.start(t)
			waitFor(t, "the release to finish", func() bool { return !tp.releasing.Load() })
			mu.Lock()
			defer mu.Unlock()
			for _, resource := range []string{"services", "endpointslices"} {
				if got := atList[resource]; len(got) == 0 || slices.ContainsFunc(got, func(v int) bool { return v != tc.wantList }) {
					t.Errorf("GOGC while listing %s: %v, want %d at each list", resource, got, tc.wantList)
				}
			}
			if gogc != tc.process {
				t.Errorf("GOGC %d after the first sync, want the process's %d back", gogc, tc.process)
			}
		})
	}
}

// TestResidentHeapMetricsAreTheRuntimes: every metric residentHeap and
// heapAllocated read is one this Go runtime has (an unknown name would
// read as nothing).
func TestResidentHeapMetricsAreTheRuntimes(t *testing.T) {
	var names []string
	for _, d := range metrics.All() {
		names = append(names, d.Name)
	}
	for _, n := range append(slices.Clone(residentMetrics), allocatedMetric) {
		if !slices.Contains(names, n) {
			t.Errorf("runtime/metrics has no %s", n)
		}
	}
	if residentHeap() == 0 || heapAllocated() == 0 {
		t.Errorf("residentHeap: %d, heapAllocated: %d", residentHeap(), heapAllocated())
	}
}
