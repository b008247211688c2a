package nft

import (
	"fmt"
	"time"

	"github.com/google/nftables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// ResyncStats says what the last Resync or Repair did.
type ResyncStats struct {
	// Rebuilt: the table was replaced in one batch; Reason says why (the
	// first Resync, a failure before, a table missing or not the one we
	// write, a failed read or drift batch).
	Rebuilt bool
	Reason  string
	// Read is the number of elements read from the kernel by the drift
	// check (0 when it did not run).
	Read int
	// Added and Deleted count the element changes of a drift repair: a
	// map element with a wrong value counts once in each.
	Added, Deleted int
	// Forward is what was done to other tables' forward chains, and
	// ForwardErr their last failure ("" for none), returned by Resync or
	// the Repair only the first time (ensureForwardAccepts).
	Forward    ForwardStats
	ForwardErr string
}

// LastResync returns what the last Resync or Repair did.
func (w *Writer) LastResync() ResyncStats { return w.last }

// Resync makes the table match plan, and the writer's mirror the plan.
//
// When the mirror is believed current (a Resync succeeded before and no
// call failed since), Resync reads the table from the kernel (its sets
// with their elements, its chains and their rule counts), and if it has
// the sets, chains and rule counts we write, sends only the elements that
// differ from the plan, deletes before adds, in one atomic batch; with
// nothing changed it sends nothing. Otherwise (the first Resync, after a
// failure or a Cleanup, a table missing or structurally different, a
// failed read or a refused drift batch) it replaces the whole table in
// one batch that deletes and re-creates it with its chains, sets,
// elements and rules. Either way traffic never sees a half-written
// table: each batch is atomic. LastResync tells which path was taken. A Repair in
// progress (StartRepair) is abandoned.
//
// Then it keeps our accept rule in other tables' forward chains of policy
// drop (forward.go); a failure there leaves our table in place and is
// returned, wrapping ErrForwardAccepts, only the first time it is seen.
func (w *Writer) Resync(plan policy.Plan) error {
	w.cursor = nil
	if err := w.cfg.Validate(); err != nil {
		w.needsResync = true
		return fmt.Errorf("resync table inet %s: %w", TableName, err)
	}
	if err := w.reconcile(mirrorOf(plan)); err != nil {
		return err
	}
	return w.ensureForwardAccepts()
}

// reconcile brings the table to m by a drift repair when the mirror is
// current, else by a rebuild.
func (w *Writer) reconcile(m *mirror) error {
	if w.needsResync {
		return w.rebuild(m, ResyncStats{Reason: "mirror not current (first resync, or a failure before)"})
	}
	var st ResyncStats
	sets, err := w.readStructure()
	var d diff
	for id := 0; err == nil && id < numSets(); id++ {
		var part diff
		var n int
		part, n, err = w.setDrift(m, setID(id), sets[id])
		st.Read += n
		d.add, d.del = append(d.add, part.add...), append(d.del, part.del...)
	}
	if err == nil {
		err = w.sendDrift(d, &st)
	}
	if err != nil {
		st.Reason = err.Error()
		return w.rebuild(m, st)
	}
	w.mirror, w.last = m, st
	return nil
}

// sendDrift sends a drift repair in one batch, if there is any.
func (w *Writer) sendDrift(d diff, st *ResyncStats) error {
	if len(d.add)+len(d.del) == 0 {
		return nil
	}
	err := w.queueDiff(d, newSets(w.table))
	if err == nil {
		err = w.conn.Flush()
	}
	if err != nil {
		return fmt.Errorf("drift repair of %d element adds, %d deletes: %w", len(d.add), len(d.del), err)
	}
	st.Added += len(d.add)
	st.Deleted += len(d.del)
	return nil
}

// rebuild replaces the whole table with m's elements in one batch.
func (w *Writer) rebuild(m *mirror, st ResyncStats) error {
	w.needsResync = true
	st.Rebuilt, st.Added, st.Deleted = true, 0, 0
	w.last = st
	if err := w.queueTable(m); err != nil {
		return fmt.Errorf("resync table inet %s: %w", TableName, err)
	}
	if err := w.conn.Flush(); err != nil {
		return fmt.Errorf("resync table inet %s: %w", TableName, err)
	}
	w.mirror = m
	w.needsResync = false
	return nil
}

// repairCursor is a Repair in slices in progress.
type repairCursor struct {
	sets []*nftables.Set // the kernel's, by setID, once the structure is checked
	next int             // the next set to check
	st   ResyncStats
}

// StartRepair begins a Repair made in slices by RepairStep, so that the
// caller can Apply changes between them. Before the first Resync and
// after a failure it returns ErrNeedsResync.
func (w *Writer) StartRepair() error {
	w.cursor = nil
	if w.needsResync {
		return ErrNeedsResync
	}
	w.cursor = &repairCursor{}
	return nil
}

// RepairStep does the next slice of the Repair StartRepair began, for
// about budget or until stop (nil: never) reports true, at least one
// set: first the structure check, then set after set, each
// set's drift in one atomic batch (an Apply between slices changes the
// mirror and the kernel alike, and a set is read and diffed within one
// slice). A table found missing or not ours, a failed read or a refused
// batch rebuild the whole table from the mirror at once. It returns done
// when the whole table was checked (LastResync then tells what the
// Repair did; our accept rules in other tables' forward chains are then
// kept as Resync keeps them), and at once with ErrNeedsResync if a call failed since
// StartRepair.
func (w *Writer) RepairStep(budget time.Duration, stop func() bool) (done bool, err error) {
	c := w.cursor
	switch {
	case c == nil:
		return true, nil
	case w.needsResync:
		w.cursor = nil
		return true, ErrNeedsResync
	}
	start := time.Now()
	if c.sets == nil {
		if c.sets, err = w.readStructure(); err != nil {
			return w.endRepair(err)
		}
	}
	var d diff
	for c.next < numSets() { // at least one set per slice
		part, n, err := w.setDrift(w.mirror, setID(c.next), c.sets[c.next])
		if err != nil {
			return w.endRepair(err)
		}
		c.st.Read += n
		d.add, d.del = append(d.add, part.add...), append(d.del, part.del...)
		c.next++
		if time.Since(start) >= budget || (stop != nil && stop()) {
			break
		}
	}
	if err := w.sendDrift(d, &c.st); err != nil {
		return w.endRepair(err)
	}
	if c.next < numSets() {
		return false, nil
	}
	return w.endRepair(nil)
}

// endRepair ends a Repair in slices; an error rebuilds the table.
func (w *Writer) endRepair(err error) (bool, error) {
	st := w.cursor.st
	w.cursor = nil
	if err != nil {
		st.Reason = err.Error()
		return true, w.rebuild(w.mirror, st)
	}
	w.last = st
	return true, w.ensureForwardAccepts()
}
