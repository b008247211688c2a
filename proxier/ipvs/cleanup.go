package ipvs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"syscall"
)

// Removed is what Clean removed, or with dryRun would remove.
type Removed struct {
	// VirtualServers are ours, sorted.
	VirtualServers []Key
	// Link is the dummy interface's name; "" when it did not exist (or,
	// with an error, could not be deleted).
	Link string
}

// Cleanup deletes the virtual servers that are ours (on addresses of the
// dummy interface, NodePort virtual servers of the last plan, those this
// Writer created, and those adopted with AdoptRecorded) and the dummy
// interface. It reads the kernel, so it works in a fresh process; there,
// without a plan, NodePort virtual servers on node addresses are ours
// only if AdoptRecorded named them, and other ones are left alone.
// Foreign and excluded virtual servers are never touched.
func (w *Writer) Cleanup() error {
	_, err := w.Clean(false)
	return err
}

// cleanPasses bounds Clean's reads of the kernel: a dump of the virtual
// servers can miss some when IPVS changes meanwhile (the kernel resumes a
// dump by position in one table that every network namespace shares, so
// even a namespace being torn down elsewhere moves it), and Clean reads
// again until a pass finds none of ours left.
const cleanPasses = 5

// Clean is Cleanup that also returns what it removed: the virtual
// servers and the link it deleted, those that failed left out. With
// dryRun it changes nothing and returns what Cleanup would remove.
func (w *Writer) Clean(dryRun bool) (Removed, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.forget()
	var r Removed
	var errs []error
	recorded := w.recorded  // readKernel consumes the record; every pass needs it
	tried := map[Key]bool{} // deleted, gone or refused: never sent twice
	for range cleanPasses {
		w.recorded = recorded
		if err := w.readKernel(); err != nil {
			return r, errors.Join(append(errs, err)...)
		}
		var ours []Key
		for _, k := range slices.SortedFunc(maps.Keys(w.mirror), Key.Compare) {
			if w.owns(k) && !w.excluded(k.Address) && !tried[k] {
				ours = append(ours, k)
			}
		}
		if dryRun {
			r.VirtualServers = ours
			break
		}
		if len(ours) == 0 {
			break
		}
		for _, k := range ours {
			tried[k] = true
		}
		errs = append(errs, w.deleteAll(ours, &r)...)
	}
	slices.SortFunc(r.VirtualServers, Key.Compare)
	if w.linkExists {
		var err error
		if !dryRun {
			err = w.call("delete-link", func() error { return gone(w.links.DeleteLink(w.cfg.Interface), syscall.ENODEV) })
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete link %s: %w", w.cfg.Interface, err))
		} else {
			r.Link = w.cfg.Interface
		}
	}
	return r, errors.Join(errs...)
}

// deleteAll deletes virtual servers ks in one Write (each answer is its
// virtual server's), adds those gone to r, and returns the failures.
func (w *Writer) deleteAll(ks []Key, r *Removed) []error {
	ops := make([]Op, len(ks))
	for i, k := range ks {
		ops[i] = Op{Kind: OpDeleteService, VS: VirtualServer{Key: k}}
	}
	answers := w.kernel.Write(ops)
	w.ops[OpDeleteService.String()] += len(ops)
	var errs []error
	for i, k := range ks {
		answer := fmt.Errorf("%w: the kernel answered %d of %d deletions", ErrUnanswered, len(answers), len(ks))
		if i < len(answers) {
			answer = answers[i]
		}
		if err := gone(answer, syscall.ESRCH); err != nil {
			w.ops["error"]++
			errs = append(errs, fmt.Errorf("delete virtual server %s: %w", k, err))
			continue
		}
		r.VirtualServers = append(r.VirtualServers, k)
	}
	return errs
}
