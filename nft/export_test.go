package nft

import (
	"fmt"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Whole-table forms of the Writer's repair and rebuild, for this
// package's tests and benchmarks: the loop repairs in slices
// (StartRepair, RepairStep), and Resync rebuilds when it must.

// Repair is Resync of what the writer last programmed (the last Resync's
// plan with the Applies since), without a plan: it repairs drift, such as
// an element deleted by hand, in place, and rebuilds the table when it is
// missing or structurally different. Before the first Resync and after a
// failure it changes nothing and returns ErrNeedsResync: the caller must
// Resync the plan.
func (w *Writer) Repair() error {
	w.cursor = nil
	if w.needsResync {
		return ErrNeedsResync
	}
	return w.reconcile(w.mirror)
}

// Rebuild atomically replaces the table with the one plan needs, whatever
// the kernel holds: one batch that adds, deletes and re-creates the table
// with its chains, sets, elements and rules. Resync falls back to it.
func (w *Writer) Rebuild(plan policy.Plan) error {
	w.cursor = nil
	if err := w.cfg.Validate(); err != nil {
		w.needsResync = true
		return fmt.Errorf("rebuild table inet %s: %w", TableName, err)
	}
	return w.rebuild(mirrorOf(plan), ResyncStats{Reason: "rebuild asked"})
}
