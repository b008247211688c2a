package wholerepair

import (
	"errors"
	"time"
)

// Slicer is the sliced repair of proxier/ipvs's Writer.
type Slicer interface {
	StartRepair() error
	NeedsResync() bool
	RepairStep(budget time.Duration, stop func() bool) (done bool, err error)
}

// Run makes a whole repair: StartRepair, then RepairStep until done,
// joining every step's error. A start that leaves the writer needing a
// resync ends it at once.
func Run(w Slicer) error {
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
