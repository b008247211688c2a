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
// heap has grown by an eighth (and at least releaseGrowthMin) since the
// last release left it: a burst of changes or of checks is then
// returned once it is over, and a steady trickle costs a collection only
// every so often. An eighth, not more: a quiet node's resident set is
// what its operator sees, and it swings by that much between releases;
// a release costs one collection of the live heap. Growth is measured from what the release left, not
// from the live heap: spans that still hold a live object stay resident,
// and measured from the live heap a quiet loop would release again and
// again.
const (
	quietBeforeRelease = 5 * time.Second
	releaseGrowthMin   = 8 << 20
	releaseGrowthShare = 8 // an eighth
)

// residentMetrics add up to the heap the process holds: live and
// unswept objects, free space in spans in use, and free pages not yet
// returned to the OS.
var residentMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

// residentHeap reads the resident heap from runtime/metrics, which stops
// no goroutine.
func residentHeap() uint64 {
	s := make([]metrics.Sample, len(residentMetrics))
	for i, name := range residentMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	var sum uint64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			sum += v.Value.Uint64()
		}
	}
	return sum
}

// releaseIfQuiet releases the heap when the loop has synced, has been
// quiet for quietBeforeRelease and the heap grew enough since the last
// release. The loop's idle probe calls it.
func (p *Proxier) releaseIfQuiet() {
	if !p.cfg.ReleaseMemory || !p.st.synced || p.clock.Since(p.st.lastEnd) < quietBeforeRelease {
		return
	}
	read := p.residentHeap
	if read == nil {
		read = residentHeap
	}
	base := p.releasedResident.Load()
	if read() < base+max(releaseGrowthMin, base/releaseGrowthShare) {
		return
	}
	p.releaseMemory()
}

// releaseMemory returns the freed heap to the OS beside the loop, when
// Config.ReleaseMemory is set; one at a time. It then notes the
// resident heap, from which releaseIfQuiet measures growth.
func (p *Proxier) releaseMemory() {
	if !p.cfg.ReleaseMemory || !p.releasing.CompareAndSwap(false, true) {
		return
	}
	release, read := p.freeOSMemory, p.residentHeap
	if release == nil {
		release = debug.FreeOSMemory
	}
	if read == nil {
		read = residentHeap
	}
	go func() {
		defer p.releasing.Store(false)
		release()
		p.releasedResident.Store(read())
	}()
}
