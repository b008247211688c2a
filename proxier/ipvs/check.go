package ipvs

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// Check: drift noticed without changing anything, at a bounded cost. The
// kernel announces no IPVS change, so Check reads: the dummy interface
// (one rtnetlink request, every call), then, on its schedule
// (driftSchedule), every virtual server's count of destinations (one
// read of /proc/net/ip_vs, in the background on a second handle:
// countRead), the dummy interface's addresses (one dump), and the
// destinations of our virtual servers in turn within a budget.

// Check verifies, without changing anything, that the dummy interface
// known from the last sync still exists with the same index (one
// rtnetlink request), that every virtual server we programmed is still
// in the kernel with as many destinations as we programmed (one read of
// /proc/net/ip_vs, on Config.RepairReader in the background, compared by
// the Check that finds it done; a dump of the virtual servers where that
// cannot be read) and every address we bound still on the interface (one
// dump of its addresses; each of these at most once per
// driftCheckInterval, less often when it is costly), and then reads
// back, in turn, the destinations of as many of our virtual servers as
// destCheckBudget allows. If the link was deleted or replaced it returns
// an error wrapping ErrLinkChanged, if a virtual server, an address or a
// destination is gone (or a destination changed) one wrapping ErrDrift,
// and NeedsResync becomes true. Before the first sync, and when a Resync
// is due already, it returns nil.
func (w *Writer) Check() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.needsResync || !w.started {
		return nil // a Resync is due and re-reads everything anyway
	}
	err := w.linkChanged()
	if err == nil && w.drift.begin() {
		err = w.countsDrifted()
		if start, due := w.drift.dumpStart(); err == nil && due {
			err = w.drifted()
			w.drift.dumped(start)
		}
		if err == nil {
			err = w.destsDrifted()
		}
	}
	if err != nil {
		w.needsResync = true
	}
	return err
}

// driftCheckInterval spaces Check's dumps of the addresses and reads of
// the virtual servers: at most one a second, whatever the loop's probe
// interval, so that an idle node with thousands of services does not
// read them twice a second, and a deletion is still noticed within a
// second while the reads are cheap. Costly reads are spaced more (see
// countCheckCostShare).
const driftCheckInterval = time.Second

// driftSchedule says when Check reads what. A drift check is made at
// most once per driftCheckInterval; within it, the destination count
// (countsDrifted) and the dump of the addresses (and of the virtual
// servers where the count cannot be read) are each spaced to
// countCheckCostShare times their last duration, and the destinations
// are read in turn (destsDrifted) within destCheckBudget.
type driftSchedule struct {
	now       func() time.Time
	checkedAt time.Time // when the last drift check began
	countDue  time.Time // when the destinations are next counted
	dumpDue   time.Time // when the addresses are next dumped
	// countsRead: the last count succeeded. It lists every virtual
	// server, so the dump of virtual servers is not needed.
	countsRead bool
	cursor     destCursor // where the turn of destination reads is
	count      countRead  // the count under way in the background
}

// begin reports whether a drift check is due now, and if so marks it
// begun.
func (s *driftSchedule) begin() bool {
	now := s.now()
	if now.Sub(s.checkedAt) < driftCheckInterval {
		return false
	}
	s.checkedAt = now
	return true
}

// spaced is when a read that began at start, and has just ended, is next
// due: driftCheckInterval later, or countCheckCostShare times its
// duration when that is longer.
func (s *driftSchedule) spaced(start time.Time) time.Time {
	return start.Add(max(driftCheckInterval, countCheckCostShare*s.now().Sub(start)))
}

// countStart reports whether the count is due, and when it begins.
func (s *driftSchedule) countStart() (time.Time, bool) {
	now := s.now()
	return now, !now.Before(s.countDue)
}

// counted records a count that began at start and took took: next due
// as its cost allows, or after countCheckRetry when it failed (err).
func (s *driftSchedule) counted(start time.Time, took time.Duration, err error) {
	s.countsRead = err == nil
	if err != nil {
		s.countDue = start.Add(countCheckRetry)
		return
	}
	s.countDue = start.Add(max(driftCheckInterval, countCheckCostShare*took))
}

// dumpStart reports whether the dump is due, and when it begins.
func (s *driftSchedule) dumpStart() (time.Time, bool) {
	now := s.now()
	return now, !now.Before(s.dumpDue)
}

// dumped records a dump that began at start.
func (s *driftSchedule) dumped(start time.Time) { s.dumpDue = s.spaced(start) }

// drifted reports (ErrDrift) an address we bound that is no longer on
// the dummy interface, or, when the count read (countsDrifted, which
// lists every virtual server) failed last time and none is under way, a
// virtual server we programmed that is no longer in the kernel. Others'
// virtual servers and addresses are not looked at.
func (w *Writer) drifted() error {
	if !w.drift.countsRead && w.drift.count.done == nil {
		if err := w.serversDrifted(); err != nil {
			return err
		}
	}
	if !w.linkExists || len(w.bound) == 0 {
		return nil
	}
	prefixes, err := w.links.Addrs(w.cfg.Interface)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", w.cfg.Interface, err)
	}
	missing := len(w.bound)
	for _, p := range prefixes {
		if _, ok := w.bound[p.Addr().Unmap()]; ok {
			missing--
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d addresses gone from %s: %w", missing, w.cfg.Interface, ErrDrift)
	}
	return nil
}

// serversDrifted reports (ErrDrift) a virtual server we programmed that
// is no longer in the kernel, from one dump of the virtual servers.
func (w *Writer) serversDrifted() error {
	vss, err := w.kernel.VirtualServers()
	if err != nil {
		return fmt.Errorf("list virtual servers: %w", err)
	}
	ours := 0
	for k := range w.desired {
		if w.mirror[k] != nil {
			ours++
		}
	}
	for _, vs := range vss {
		if w.desired[vs.Key] != nil && w.mirror[vs.Key] != nil {
			ours--
		}
	}
	if ours > 0 {
		return fmt.Errorf("%d of our virtual servers gone from the kernel: %w", ours, ErrDrift)
	}
	return nil
}

// The count of every virtual server's destinations, in one read. The
// kernel announces no IPVS change, and generic netlink lists
// destinations one virtual server per request, so reading them all back
// on a node with thousands of services takes seconds; /proc/net/ip_vs
// lists every virtual server with its destinations in one read. A
// destination deleted or added by hand changes its virtual server's
// count, which countsDrifted compares with what we programmed; a
// destination replaced by another (the count unchanged) is left to the
// reads in turn (destsDrifted) and the periodic repair.
//
// The read's cost grows with the table, so its period stretches to
// countCheckCostShare times its last duration: every driftCheckInterval
// while the read is cheap, and never more than a small share of a CPU.
const countCheckCostShare = 50

// countCheckRetry is when an unreadable table is tried again.
const countCheckRetry = time.Minute

// countsDrifted compares every virtual server's destination count with
// ours, when due, and reports (ErrDrift) the first that differs. With
// Config.RepairReader the count is read on it in the background
// (countRead): Check waits for it at most countWait, and a later Check
// compares what it read.
func (w *Writer) countsDrifted() error {
	if w.cfg.RepairReader != nil {
		return w.countsDriftedBeside()
	}
	start, due := w.drift.countStart()
	if !due {
		return nil
	}
	counts, err := w.kernel.DestinationCounts()
	took := w.drift.now().Sub(start)
	w.drift.counted(start, took, err)
	if err != nil {
		return nil // see countsDriftedBeside
	}
	return w.compared(start, w.compareCounts(counts, nil))
}

// countsDriftedBeside is countsDrifted with the read on
// Config.RepairReader, beside the loop.
func (w *Writer) countsDriftedBeside() error {
	c := &w.drift.count
	if c.done == nil {
		start, due := w.drift.countStart()
		if !due {
			return nil
		}
		c.begin(start, w.cfg.RepairReader)
	}
	res, ok := c.await(countWait)
	if !ok {
		return nil // still reading: a later Check compares it
	}
	start, touched, stale := c.start, c.touched, c.stale
	*c = countRead{}
	w.drift.counted(start, res.took, res.err)
	if res.err != nil || stale {
		// The table unreadable (/proc/net/ip_vs missing or masked) says
		// nothing of drift; the dump of virtual servers (drifted), the
		// reads in turn and the periodic repair still run, and the count
		// is tried again later. A count that a Resync or a forgotten
		// state overtook is not compared.
		return nil
	}
	return w.compared(start, w.compareCounts(res.counts, touched))
}

// errCountContradicted is compareCounts' answer when a direct read of
// the virtual server the count called drifted shows it as programmed.
var errCountContradicted = errors.New("the count of destinations contradicted by a direct read")

// compared ends a count begun at start with compareCounts' err: a count
// a direct read contradicted is treated as unreadable (no drift, the dump
// of virtual servers stands in, counted again after countCheckRetry).
func (w *Writer) compared(start time.Time, err error) error {
	if errors.Is(err, errCountContradicted) {
		w.drift.counted(start, 0, err)
		return nil
	}
	return err
}

// compareCounts reports (ErrDrift) the first of our virtual servers
// whose count of destinations in counts differs from the mirror's,
// leaving out those in skip (changed since counts was read), once a
// direct read of it agrees (confirmDrift).
func (w *Writer) compareCounts(counts map[Key]int, skip map[Key]bool) error {
	for k, a := range w.mirror {
		if a == nil || w.desired[k] == nil || skip[k] {
			continue
		}
		if n, ok := counts[k]; !ok || n != len(a.dests) {
			return w.confirmDrift(k, a)
		}
	}
	return nil
}

// confirmDrift reads virtual server k, which the count calls drifted,
// alone: ErrDrift if it is gone or holds another number of destinations
// than a, else errCountContradicted. The count is not always the
// kernel's word: it hands /proc/net/ip_vs out by position (each page
// resumes at an index), so a virtual server added or deleted while it was
// read hides or repeats another, and on kernels whose IPVS service table
// is shared by every network namespace the file's walk from one entry to
// the next strays into other namespaces' virtual servers (those of a
// pod or a container runtime that uses IPVS), which shifts, cuts short
// or doubles what it lists.
func (w *Writer) confirmDrift(k Key, a *actual) error {
	_, err := w.kernel.VirtualServer(k)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("virtual server %s gone from the kernel: %w", k, ErrDrift)
	case err != nil:
		return fmt.Errorf("read virtual server %s: %w", k, err)
	}
	ds, err := w.kernel.Destinations(k)
	switch {
	case err != nil:
		return fmt.Errorf("list destinations of virtual server %s: %w", k, err)
	case len(ds) != len(a.dests):
		return fmt.Errorf("virtual server %s: %d destinations in the kernel, %d programmed: %w", k, len(ds), len(a.dests), ErrDrift)
	}
	return errCountContradicted
}

// countWait is how long Check waits for a count read in the
// background: one that ends within it (a small table) is compared at
// once, as when it is read on the Writer's handle.
const countWait = destCheckBudget

// countRead is a count of every virtual server's destinations read in
// the background. The kernel hands /proc/net/ip_vs out a page at a time
// and finds each page's first virtual server by walking its table from
// the start, so on a large table one read keeps it busy long; Check runs
// in the loop's goroutine, which would wait for it, and every change
// with it. What the Writer changes meanwhile (touch) is left out of the
// comparison: the read may predate it.
type countRead struct {
	done    chan countResult // nil when no read is under way
	start   time.Time        // on the Writer's clock
	touched map[Key]bool     // virtual servers changed since start
	stale   bool             // the whole mirror was read anew or forgotten since
}

// countResult is a background count's answer; took is wall-clock time,
// whatever the Writer's clock says.
type countResult struct {
	counts map[Key]int
	err    error
	took   time.Duration
}

// begin starts a count on k.
func (c *countRead) begin(start time.Time, k Kernel) {
	done := make(chan countResult, 1)
	*c = countRead{done: done, start: start, touched: map[Key]bool{}}
	go func() {
		t0 := time.Now()
		counts, err := k.DestinationCounts()
		done <- countResult{counts: counts, err: err, took: time.Since(t0)}
	}()
}

// await waits up to budget for the count's answer.
func (c *countRead) await(budget time.Duration) (countResult, bool) {
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case r := <-c.done:
		return r, true
	case <-t.C:
		return countResult{}, false
	}
}

// touch notes that virtual server k changed while a count is under way.
func (c *countRead) touch(k Key) {
	if c.done != nil {
		c.touched[k] = true
	}
}

// overtaken notes that the whole mirror changed while a count is under
// way: it will not be compared.
func (c *countRead) overtaken() {
	if c.done != nil {
		c.stale = true
	}
}

// destCheckBudget is how long one Check may spend reading destinations
// back. The kernel announces no IPVS change, and a virtual server's
// destinations are one request each, so Check reads them in turn, as
// many virtual servers as fit in the budget, from where the last Check
// stopped. A destination deleted or added by hand changes a count, which
// the count check (countsDrifted) sees on any node within about a
// second; these reads find what a count cannot, a destination replaced
// by another or changed in place: on a node with a few dozen services
// within a second, on a large node within a pass or the periodic repair,
// at a bounded cost per Check either way.
const destCheckBudget = 20 * time.Millisecond

// destCursor is where the turn of destination reads is: the virtual
// servers of the pass in progress and the next one to read.
type destCursor struct {
	keys []Key
	next int
}

// destsDrifted reads the destinations of our virtual servers in turn for
// at most destCheckBudget and at most one pass, and reports (ErrDrift) a
// virtual server whose destinations in the kernel are not those we
// programmed: one deleted or added by hand (addresses are compared, as
// the repair compares them).
func (w *Writer) destsDrifted() error {
	start := w.drift.now()
	for visited := 0; ; visited++ {
		c := &w.drift.cursor
		if c.next >= len(c.keys) {
			if visited > 0 {
				return nil // a whole pass in one Check
			}
			c.keys, c.next = c.keys[:0], 0
			for k, a := range w.mirror {
				if w.desired[k] != nil && a != nil {
					c.keys = append(c.keys, k)
				}
			}
			if len(c.keys) == 0 {
				return nil
			}
		}
		k := c.keys[c.next]
		c.next++
		a := w.mirror[k]
		if a == nil || w.desired[k] == nil {
			continue // gone from the plan since the pass began
		}
		ds, err := w.kernel.Destinations(k)
		if err != nil {
			return fmt.Errorf("list destinations of virtual server %s: %w", k, err)
		}
		if !sameDestinations(a.dests, ds) {
			return fmt.Errorf("virtual server %s: %d destinations in the kernel, %d programmed, or other addresses: %w", k, len(ds), len(a.dests), ErrDrift)
		}
		if w.drift.now().Sub(start) >= destCheckBudget {
			return nil
		}
	}
}
