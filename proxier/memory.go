package proxier

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Returning freed heap to the OS. The Go runtime keeps the pages a
// collection freed, up to its next goal (by default twice the live
// heap), and returns them only slowly: after a cold start, a repair or a
// burst of changes, a quiet proxy's resident set stays near its busiest.
// With Config.ReleaseMemory the loop returns them at once after what
// reads or writes the whole table (a full sync, a periodic repair), and,
// when the loop has been quiet for quietBeforeRelease, after the resident
// heap has grown past the live heap of the last release by a quarter
// (and at least releaseGrowthMin): a burst of changes or of checks is
// then returned once it is over, and a steady trickle costs a collection
// only every so often.
const (
	quietBeforeRelease = 5 * time.Second
	releaseGrowthMin   = 8 << 20
)

// heapSizes is the live heap (as of the last collection) and the heap
// the process holds: live and unswept objects, free space in spans in
// use, and free pages not yet returned.
type heapSizes struct{ live, resident uint64 }

var heapMetrics = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

// readHeapSizes reads heapSizes from runtime/metrics, which stops no
// goroutine.
func readHeapSizes() heapSizes {
	s := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return heapSizes{live: v(0), resident: v(1) + v(2) + v(3)}
}

// releaseIfQuiet releases the heap when the loop has synced, has been
// quiet for quietBeforeRelease and the heap grew enough since the last
// release. The loop's idle probe calls it.
func (p *Proxier) releaseIfQuiet() {
	if !p.cfg.ReleaseMemory || !p.st.synced || p.clock.Since(p.st.lastEnd) < quietBeforeRelease {
		return
	}
	read := p.heapSizes
	if read == nil {
		read = readHeapSizes
	}
	base := p.releasedLive.Load()
	if h := read(); h.resident < base+max(releaseGrowthMin, base/4) {
		return
	}
	p.releaseMemory()
}

// releaseMemory returns the freed heap to the OS beside the loop, when
// Config.ReleaseMemory is set; one at a time. It then notes the live
// heap, from which releaseIfQuiet measures growth.
func (p *Proxier) releaseMemory() {
	if !p.cfg.ReleaseMemory || !p.releasing.CompareAndSwap(false, true) {
		return
	}
	release, read := p.freeOSMemory, p.heapSizes
	if release == nil {
		release = debug.FreeOSMemory
	}
	if read == nil {
		read = readHeapSizes
	}
	go func() {
		defer p.releasing.Store(false)
		release()
		p.releasedLive.Store(read().live)
	}()
}
