package ipvs

import (
	"errors"
	"time"
)

// A whole Repair at once, for this package's tests and benchmarks: the
// loop repairs in slices (StartRepair, RepairStep).

// Repair makes a whole Repair at once: StartRepair, then RepairStep until
// done.
func (w *Writer) Repair() error {
	errs := []error{w.StartRepair()}
	if errs[0] != nil && w.NeedsResync() {
		return errs[0]
	}
	for {
		done, err := w.RepairStep(time.Hour, nil)
		errs = append(errs, err)
		if done {
			return errors.Join(errs...)
		}
	}
}
