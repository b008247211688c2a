package proxier

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The memory rule, two parts, both under Config.ReleaseMemory.
//
// A full sync runs the collector at fullSyncGCPercent. With GOGC 100 the
// runtime lets the heap grow to twice what the last collection found
// live, and a full sync is when the live heap is largest: the informers'
// objects, the engine and both writers' state, and the whole plan and
// its kernel batch on top. The peak resident set of a cold start is that
// goal. A quarter holds it to 1.25 times the live heap, in proportion to
// the cluster at any size, for more collections while the sync runs; the
// process's own GOGC comes back when it ends, so a quiet or churning
// proxy pays nothing.
//
// The informers' first lists, which fill the caches the first sync
// reads, run at listGCPercent (Run). While they decode, the heap is
// mostly the decoded objects' garbage above a live heap still small, and
// in a small cluster the goal GOGC 100 sets then, not the full sync's,
// was the cold start's peak. Half, not a quarter: the collector's work
// per byte allocated goes as 100/GOGC whatever the live heap, and the
// lists allocate several times what they keep: across them a quarter
// adds three times GOGC 100's collector work, at any size, and half adds
// it once, for most of the same cut in a small cluster's peak. In a large
// cluster the full sync's goal is the peak, and the lists' tighter
// collector only costs CPU, at every start and restart: the trade is
// kept because a small cluster's peak is the lists'.
//
// Returning freed heap to the OS. The Go runtime keeps the pages a
// collection freed, up to its next goal, and returns them only slowly:
// after a cold start, a repair or a burst of changes, a quiet proxy's
// resident set would stay near its busiest, and a node's operator reads
// the resident set. The loop returns them at once after what reads or
// writes the whole table (a full sync, a periodic repair), and once the
// loop has been quiet for quietBeforeRelease: after syncs since the last
// release, as soon as releaseGrowthMin was allocated since it (a burst is
// returned once it is over); otherwise once a sixteenth of the resident
// heap was (the idle checks' garbage costs a collection of the live heap
// only every so often). It counts bytes allocated, not the heap's growth:
// a burst with collections of its own can end with the heap no larger
// than the last release left it and the pages those collections freed
// still resident.
//
// Why not a memory limit (GOMEMLIMIT, debug.SetMemoryLimit) in place of
// either: a limit is a fixed number of bytes, and the live heap grows
// with the cluster. One low enough to hold the quiet resident set as low
// is below the cold start's live heap, and one that bounds the cold
// start's peak is below the live heap of a cluster a few times larger:
// above it the runtime collects without pause. A lower GOGC is a ratio.
// The container's own limit, where a pod sets one, reaches the runtime
// with no code as GOMEMLIMIT from the downward API. The measurements are
// in benchmarks/NOTES.md, "Memory" and "The memory rule".
const (
	fullSyncGCPercent  = 25
	listGCPercent      = 50
	quietBeforeRelease = 5 * time.Second
	releaseGrowthMin   = 4 << 20
	releaseGrowthShare = 16 // a sixteenth
)

// tightenGC sets the collector's GOGC to percent, when
// Config.ReleaseMemory is set and the process runs it looser, and returns
// what puts the process's back. A process run with the collector off
// (GOGC=off) or tighter keeps its own.
func (p *Proxier) tightenGC(percent int) (restore func()) {
	set := p.setGCPercent
	if set == nil {
		set = debug.SetGCPercent
	}
	if !p.cfg.ReleaseMemory {
		return func() {}
	}
	old := set(percent)
	if old < 0 || old <= percent {
		set(old)
		return func() {}
	}
	return func() { set(old) }
}

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
