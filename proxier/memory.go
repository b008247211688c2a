package proxier

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Returning freed heap to the OS. The Go runtime keeps the pages a
// collection freed, up to its next goal (twice the live heap), and
// returns them only slowly: after a cold start, a repair or a burst of
// changes, a quiet proxy's resident set would stay near its busiest, and
// a node's operator reads the resident set. With Config.ReleaseMemory the
// loop returns them at once after what reads or writes the whole table
// (a full sync, a periodic repair), and once the loop has been quiet for
// quietBeforeRelease: after syncs since the last release, as soon as
// releaseGrowthMin was allocated since it (a burst is returned once it
// is over); otherwise once a sixteenth of the resident heap was (the idle
// checks' garbage costs a collection of the live heap only every so
// often). It counts bytes allocated, not the heap's growth: a burst with
// collections of its own can end with the heap no larger than the last
// release left it and the pages those collections freed still resident.
//
// Why not a memory limit (GOMEMLIMIT, debug.SetMemoryLimit) in its
// place: a limit low enough to hold the quiet resident set as low holds
// the cold start under it too, and the runtime then collects without
// pause while the first sync's heap is above it. The measurement is in
// benchmarks/NOTES.md, "Memory".
const (
	quietBeforeRelease = 5 * time.Second
	releaseGrowthMin   = 4 << 20
	releaseGrowthShare = 16 // a sixteenth
)

// allocatedMetric counts the bytes the heap has allocated since the
// process started.
const allocatedMetric = "/gc/heap/allocs:bytes"

// heapAllocated reads allocatedMetric, which stops no goroutine.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: allocatedMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

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
// quiet for quietBeforeRelease and allocated enough since the last
// release. The loop's idle probe calls it.
func (p *Proxier) releaseIfQuiet() {
	if !p.cfg.ReleaseMemory || !p.st.synced || p.clock.Since(p.st.lastEnd) < quietBeforeRelease {
		return
	}
	allocated := p.heapAllocated
	if allocated == nil {
		allocated = heapAllocated
	}
	since := allocated() - p.releasedAllocated.Load()
	need := max(releaseGrowthMin, p.releasedResident.Load()/releaseGrowthShare)
	syncedSince := p.st.lastEnd.After(p.releasedAt)
	if syncedSince {
		need = releaseGrowthMin
	}
	if since < need {
		return
	}
	p.log.V(2).Info("Returning freed heap to the OS", "quietFor", p.clock.Since(p.st.lastEnd),
		"allocatedSinceLastRelease", since, "syncedSince", syncedSince)
	p.releaseMemory()
}

// releaseMemory returns the freed heap to the OS beside the loop, when
// Config.ReleaseMemory is set; one at a time. It then notes the
// resident heap and the bytes allocated so far, from which
// releaseIfQuiet measures what the next release waits for.
func (p *Proxier) releaseMemory() {
	if !p.cfg.ReleaseMemory || !p.releasing.CompareAndSwap(false, true) {
		return
	}
	p.releasedAt = p.clock.Now()
	release, read, allocated := p.freeOSMemory, p.residentHeap, p.heapAllocated
	if release == nil {
		release = debug.FreeOSMemory
	}
	if read == nil {
		read = residentHeap
	}
	if allocated == nil {
		allocated = heapAllocated
	}
	go func() {
		defer p.releasing.Store(false)
		release()
		p.releasedResident.Store(read())
		p.releasedAllocated.Store(allocated())
	}()
}
