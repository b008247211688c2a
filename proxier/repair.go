package proxier

import (
	"fmt"
	"time"
)

// RepairSlice bounds each slice of the periodic repair: a change queued
// during a repair waits for the slice that is running (about
// RepairSliceShortest, or one nftables set or one virtual server's
// destinations if longer), then is applied before the next slice; with
// no change queued a slice runs about this long.
const RepairSlice = 100 * time.Millisecond

// RepairSliceShortest is how long a slice runs before a change queued
// meanwhile ends it (at its next nftables set or virtual server): the
// change then waits for about this long, not a whole RepairSlice, and a
// repair under steady churn still makes progress between the syncs.
const RepairSliceShortest = RepairSlice / 4

// RepairStats describes one periodic repair.
type RepairStats struct {
	Slices  int           // RepairStep calls
	Between int           // incremental syncs made between slices
	Longest time.Duration // the longest slice (StartRepair included)
	Elapsed time.Duration // the whole repair, syncs between slices included
}

// The periodic resync, when the DataPlane repairs in slices, is a
// repair: each writer reads the kernel and repairs the drift from what
// it last programmed (the last Resync's plan with the Applies since),
// without the engine recomputing the plan, which incremental syncs keep
// current. It runs in slices of about RepairSlice, and between two slices
// the changes queued meanwhile (and due retries of failed services) are
// synced incrementally, so that no change waits behind the whole repair.
// A failed repair, or a failed incremental sync between its slices, ends
// it and makes the next sync a full Resync, retried with backoff.
// It is called with the time the repair started and StartRepair's error.
func (p *Proxier) repair(start time.Time, err error) error {
	p.obs.SyncStarted()
	p.setRepairing(true)
	var rs RepairStats
	rs.Longest = p.clock.Since(start)
	for err == nil {
		var done bool
		s := p.clock.Now()
		done, err = p.dp.RepairStep(RepairSlice, func() bool {
			return p.clock.Since(s) >= RepairSliceShortest && p.syncDue()
		})
		rs.Slices++
		rs.Longest = max(rs.Longest, p.clock.Since(s))
		if done || err != nil {
			break
		}
		if p.isStopping() {
			// The process is exiting: the rest of the repair would
			// only hold up the exit (on a large node a repair takes
			// long), and nothing is lost by leaving it.
			p.log.V(2).Info("Repair left unfinished: stopping", "slices", rs.Slices)
			break
		}
		var synced bool
		if synced, err = p.syncBetweenSlices(); synced {
			rs.Between++
		}
	}
	if err != nil {
		p.st.full = true
		err = fmt.Errorf("repair after %d slices: %w", rs.Slices, err)
	}
	p.st.lastEnd = p.clock.Now()
	elapsed := p.st.lastEnd.Sub(start)
	rs.Elapsed = elapsed
	if err == nil {
		p.health.Updated()
	}
	p.obs.IPVSOps(p.dp.IPVSOps())
	p.obs.Draining(p.dp.Draining())
	p.obs.SyncDone(true, elapsed, err)
	p.countRepair(rs, err)
	if err != nil {
		p.st.failed = true
		p.log.Error(err, "Periodic repair failed; the next sync is a full resync")
		return err
	}
	p.log.V(2).Info("Repaired", "slices", rs.Slices, "syncsBetweenSlices", rs.Between, "longestSlice", rs.Longest, "elapsed", elapsed)
	// A conntrack reconcile that failed after an earlier sync is tried
	// again.
	p.reconcileConntrack()
	p.releaseMemory() // it read the whole kernel table
	return nil
}

// syncBetweenSlices runs an incremental sync if changes were queued or a
// failed service's retry is due, and MinSyncPeriod has passed since the
// last sync.
func (p *Proxier) syncBetweenSlices() (bool, error) {
	if !p.changed.Load() && !p.retryDue() || !p.minSyncPeriodPassed() {
		return false, nil
	}
	if err := p.sync(false); err != nil {
		return true, fmt.Errorf("incremental sync between slices: %w", err)
	}
	return true, nil
}

// syncDue reports whether a change is queued that MinSyncPeriod lets
// sync now: what ends a repair slice early.
func (p *Proxier) syncDue() bool { return p.changed.Load() && p.minSyncPeriodPassed() }

func (p *Proxier) minSyncPeriodPassed() bool {
	return p.cfg.MinSyncPeriod <= 0 || p.clock.Since(p.st.lastEnd) >= p.cfg.MinSyncPeriod
}

// isStopping reports whether Run's context is done.
func (p *Proxier) isStopping() bool {
	select {
	case <-p.stopping:
		return true
	default:
		return false
	}
}

func (p *Proxier) setRepairing(on bool) {
	p.statsMu.Lock()
	p.stats.Repairing = on
	p.statsMu.Unlock()
}

// countRepair counts a repair in Stats, as a full sync.
func (p *Proxier) countRepair(rs RepairStats, err error) {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	s := &p.stats
	s.Syncs++
	s.FullSyncs++
	s.Repairs++
	s.Repairing, s.LastRepair = false, rs
	s.LastFull, s.LastError, s.LastChanged = true, err, nil
	if err != nil {
		s.Failures++
	}
}
