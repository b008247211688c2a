package ipvs

import (
	"fmt"
	"time"
)

// destCheckBudget is how long one Check may spend reading destinations
// back. The kernel announces no IPVS change, and a virtual server's
// destinations are one request each, so Check reads them in turn, as
// many virtual servers as fit in the budget, from where the last Check
// stopped. A destination deleted or added by hand changes a count, which
// the count check (destcount.go) sees on any node within about a
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
