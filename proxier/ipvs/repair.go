package ipvs

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// ErrNeedsResync is returned by StartRepair and RepairStep when the
// Writer's state is unknown (before the first sync, or after a failure
// that asks for a Resync): the caller must Resync the plan.
var ErrNeedsResync = errors.New("ipvs writer needs a full resync")

// repairCursor is a Repair in slices in progress.
type repairCursor struct {
	// dumped delivers the services dump when it runs on Config's
	// RepairReader, off the Writer's lock; nil once kernel holds it.
	dumped chan servicesDump
	kernel []VirtualServer // the services dump, sorted by key, each key once
	// concurrent: Applies may have run during the dump, which can then
	// miss a virtual server they did not touch (the kernel's dump resumes
	// by position), so one missing from it is read alone before it is
	// believed gone.
	concurrent bool
	keys       []Key // to check, sorted: dumped, planned or mirrored
	next       int
	touched    map[Key]bool // changed by an Apply since StartRepair: as fresh as the mirror
}

// servicesDump is what a RepairReader's services dump returned.
type servicesDump struct {
	vss []VirtualServer
	err error
}

// addressesStep is the Repair's last slice, after the virtual servers.
func (r *repairCursor) addressesStep() bool { return r.dumped == nil && r.next == len(r.keys) }

// StartRepair begins a Repair: a drift check of what the Writer last
// programmed (the plan of the last Resync with the Applies since)
// against the kernel, without a plan, made by RepairStep in slices so
// that Applies can run between them. It checks the dummy interface,
// retries sysctls that failed, and starts the read of the kernel's
// virtual servers (one dump): on Config's RepairReader in the
// background, so that a long dump holds up no Apply, or else here. A
// virtual server an Apply changes before its slice is skipped: the Apply
// made it as fresh as the mirror. Before the first sync, or when a
// Resync is due, it returns ErrNeedsResync.
func (w *Writer) StartRepair() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.repair = nil
	if !w.started || w.needsResync {
		return ErrNeedsResync
	}
	if err := w.linkChanged(); err != nil {
		w.needsResync = true
		return err
	}
	r := &repairCursor{touched: map[Key]bool{}}
	if reader := w.cfg.RepairReader; reader != nil {
		r.dumped, r.concurrent = make(chan servicesDump, 1), true
		go func() {
			// One dump at a time on the reader: an abandoned Repair's
			// may still run when the next one starts.
			w.dumpMu.Lock()
			defer w.dumpMu.Unlock()
			vss, err := reader.VirtualServers()
			r.dumped <- servicesDump{vss, err}
		}()
	} else {
		vss, err := w.kernel.VirtualServers()
		if err != nil {
			w.needsResync = true
			return fmt.Errorf("list virtual servers: %w", err)
		}
		w.indexDump(r, vss)
	}
	err := w.start(true) // sysctls that failed
	w.repair = r
	return err
}

// indexDump takes the services dump into r, sorted by key, and lists
// the keys to check: those dumped, planned or mirrored. The dump is
// searched, not copied into a map: on a large node a map of it was
// among a Repair's largest allocations.
func (w *Writer) indexDump(r *repairCursor, vss []VirtualServer) {
	r.dumped = nil
	slices.SortFunc(vss, func(a, b VirtualServer) int { return a.Key.Compare(b.Key) })
	r.kernel = slices.CompactFunc(vss, func(a, b VirtualServer) bool { return a.Key == b.Key })
	r.keys = make([]Key, 0, max(len(r.kernel), len(w.desired)))
	for _, vs := range r.kernel {
		r.keys = append(r.keys, vs.Key)
	}
	for k := range w.desired {
		if _, ok := r.dumpedVS(k); !ok {
			r.keys = append(r.keys, k)
		}
	}
	for k := range w.mirror {
		if _, ok := r.dumpedVS(k); !ok && w.desired[k] == nil {
			r.keys = append(r.keys, k)
		}
	}
	slices.SortFunc(r.keys, Key.Compare)
}

// dumpedVS is virtual server k as the services dump listed it.
func (r *repairCursor) dumpedVS(k Key) (VirtualServer, bool) {
	i, ok := slices.BinarySearchFunc(r.kernel, k, func(vs VirtualServer, k Key) int { return vs.Key.Compare(k) })
	if !ok {
		return VirtualServer{}, false
	}
	return r.kernel[i], true
}

// dumpPoll is how often a RepairStep waiting for the services dump asks
// its stop whether to give way.
const dumpPoll = 5 * time.Millisecond

// awaitDump waits up to budget, or until stop reports true, for the
// background services dump of the Repair r, delivered on ch (r.dumped,
// read under the lock), and takes it in. It reports whether r has its
// dump; an error ends the Repair and asks for a Resync.
func (w *Writer) awaitDump(r *repairCursor, ch <-chan servicesDump, budget time.Duration, stop func() bool) (bool, error) {
	deadline := time.Now().Add(budget) // the dump runs in wall-clock time, whatever cfg.Now says
	var d servicesDump
	for wait := true; wait; {
		left := time.Until(deadline)
		if left <= 0 || stopped(stop) {
			return false, nil
		}
		t := time.NewTimer(min(left, dumpPoll))
		select {
		case d = <-ch:
			wait = false
		case <-t.C:
		}
		t.Stop()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.repair != r { // abandoned meanwhile (a Resync)
		return false, nil
	}
	if d.err != nil {
		w.needsResync, w.repair = true, nil
		return false, fmt.Errorf("list virtual servers: %w", d.err)
	}
	w.indexDump(r, d.vss)
	return true, nil
}

// planAddresses plans the dummy addresses: every one bound or desired.
func (w *Writer) planAddresses(b *batch) {
	addrs := slices.AppendSeq(make([]netip.Addr, 0, max(len(w.bound), len(w.addrRefs))), maps.Keys(w.bound))
	for a := range w.addrRefs {
		if _, ok := w.bound[a]; !ok {
			addrs = append(addrs, a)
		}
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	if len(b.addrDone) == 0 {
		b.addrDone = make(map[netip.Addr]bool, len(addrs)) // one allocation, not a map grown by doubling
	}
	for _, a := range addrs {
		b.address(a)
	}
}

// RepairStep checks and repairs the next virtual servers of the Repair
// StartRepair began, for about budget or until stop (nil: never) reports
// true, at least one: it reads each one's destinations (one dump each)
// and makes it match the plan, as Resync does, in one batch per slice.
// The last slice reads the dummy interface's addresses (one dump) and
// repairs them, checks the draining destinations and reports done. Errors are Apply's: a failure
// confined to one service is a *ServiceError, retried with backoff; one
// that leaves the data plane unknown ends the Repair and makes
// NeedsResync true. Without a Repair in progress it reports done.
func (w *Writer) RepairStep(budget time.Duration, stop func() bool) (done bool, err error) {
	w.mu.Lock()
	if r := w.repair; r != nil && r.dumped != nil && !w.needsResync {
		// The services dump is under way: wait for it without the lock,
		// so that the caller can Apply between two such steps.
		ch := r.dumped
		w.mu.Unlock()
		if _, err := w.awaitDump(r, ch, budget, stop); err != nil {
			return true, err
		}
		w.mu.Lock()
		if w.repair == r {
			w.mu.Unlock()
			return false, nil // the slices start at the next step
		}
	}
	defer w.mu.Unlock()
	r := w.repair
	switch {
	case r == nil:
		return true, nil
	case w.needsResync:
		w.repair = nil
		return true, ErrNeedsResync
	}
	start := w.cfg.Now()
	b := w.newBatch(start)
	if r.addressesStep() {
		w.repair = nil
		exists, index, prefixes, err := w.readAddresses()
		if err == nil && (!exists || index != w.linkIndex) {
			err = fmt.Errorf("link %s: %w", w.cfg.Interface, ErrLinkChanged)
		}
		if err != nil {
			w.needsResync = true
			return true, err
		}
		w.setBound(exists, index, prefixes)
		w.planAddresses(b)
		b.drains()
		b.run()
		return true, errors.Join(b.errs...)
	}
	for r.next < len(r.keys) {
		k := r.keys[r.next]
		r.next++
		if !r.touched[k] {
			if err := w.refresh(k, r); err != nil {
				w.needsResync, w.repair = true, nil
				return true, err
			}
			b.virtualServer(k, w.stale[k], w.owns(k)) // a failed deletion is retried with its service
		}
		if w.cfg.Now().Sub(start) >= budget || stopped(stop) {
			break
		}
	}
	b.run()
	return false, errors.Join(b.errs...)
}

// stopped reports whether a slice's stop asks it to end (nil: never).
func stopped(stop func() bool) bool { return stop != nil && stop() }

// refresh re-reads one virtual server into the mirror: its state from
// the Repair's services dump (absent: gone from the mirror; read alone
// first if the dump ran beside Applies and the mirror has it) and its
// destinations read now. Managed marks and drains of what still exists
// survive.
func (w *Writer) refresh(k Key, r *repairCursor) error {
	w.drift.count.touch(k)
	vs, ok := r.dumpedVS(k)
	old := w.mirror[k]
	if !ok && old != nil && r.concurrent {
		got, err := w.kernel.VirtualServer(k)
		switch {
		case err == nil:
			vs, ok = got, true
		case !errors.Is(err, syscall.ESRCH):
			return fmt.Errorf("read virtual server %s: %w", k, err)
		}
	}
	if !ok {
		delete(w.mirror, k)
		delete(w.draining, k)
		return nil
	}
	ds, err := w.kernel.Destinations(k)
	if err != nil {
		return fmt.Errorf("list destinations of virtual server %s: %w", k, err)
	}
	if old != nil && sameDestinations(old.dests, ds) { // the usual case: no new list
		old.vs = vs
		for _, d := range ds {
			// A weight or forwarding method changed behind our back is
			// drift the batch repairs; connection counts are not kept
			// (each drain reads them afresh), so an unchanged list stays
			// shared with the desired one.
			if cur, _ := old.dests.get(d.AddrPort()); cur.Weight != d.Weight || cur.Forward != d.Forward {
				old.put(d)
			}
		}
		return nil
	}
	a := &actual{vs: vs, dests: newDestList(ds), managed: old != nil && old.managed}
	w.mirror[k] = a
	for d := range w.draining[k] {
		if !a.dests.has(d) {
			w.forgetDrain(k, d)
		}
	}
	return nil
}

// sameDestinations reports whether ds holds exactly the addresses of l.
func sameDestinations(l destList, ds []Destination) bool {
	if len(l) != len(ds) {
		return false
	}
	for _, d := range ds {
		if !l.has(d.AddrPort()) {
			return false
		}
	}
	return true
}

// touch tells a Repair in progress that a batch changed these virtual
// servers.
func (w *Writer) touch(keys map[Key]bool) {
	if w.repair == nil {
		return
	}
	for k := range keys {
		w.repair.touched[k] = true
	}
}
