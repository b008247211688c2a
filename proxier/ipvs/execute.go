package ipvs

import (
	"fmt"
	"net/netip"
	"syscall"
)

// The executor: it runs a batch's steps phase by phase, hands each
// phase's IPVS changes to the kernel in chunks, one Kernel.Write each,
// and in one pass over the answers applies each to the mirror
// (applyAnswer) and records its failure (failures): a failed step skips
// its virtual server's later steps and blames its services.

// failures is what has failed in one run of a batch.
type failures struct {
	// vs are the virtual servers with a failed step: their steps in
	// later phases are skipped, and a failure of theirs later in the
	// same Write (one that follows from the first) is not reported again.
	vs map[Key]bool
	// planeReported: a failure of the whole data plane (planeWide) was
	// reported in this phase; the same lost answer is not reported again.
	planeReported bool
}

// progress is the executor's place in a batch's run: the phase it is
// in, what has failed, and the buffers of one Write, reused from Write
// to Write.
type progress struct {
	// at is the phase running: the phases before it have run. A
	// streaming batch (stream) runs its add phase a Write at a time
	// while it is still planning.
	at     phase
	stream bool
	failed failures
	out    []sent
	ops    []Op
}

// sent is a step whose IPVS change is in a Write.
type sent struct {
	s  *step
	op Op
	// drain: the change is a retiring destination's weight set to 0,
	// not a planned update.
	drain bool
}

// run executes the steps phase by phase (the add phase of a streaming
// batch has run in part already: flush). Within a phase each step is
// prepared in order (prepare), and the IPVS changes go to the kernel
// together, in that order, in Kernel.Writes of up to writeChunk, which
// the Linux adapter sends in as few system calls as its socket buffers
// allow; the next phase starts once the kernel has answered them all, so
// a virtual server never loses its old destinations (prune) before its
// new ones are in (add). A failed step blames its services, which are
// retried with backoff, and skips its virtual server's steps in later
// phases; every other step still runs. The changes of a virtual server
// that were in the same Write as its failed one were made or refused by
// the kernel on their own: a success is recorded, and a failure, which
// follows from the first (the destinations of a virtual server the
// kernel refused to add are ESRCH), is counted but not reported again.
// The failure is the services' alone (a *ServiceError each) unless it
// leaves the whole data plane unknown (planeWide) or belongs to no
// service: then it asks for a Resync.
func (b *batch) run() {
	b.runBefore(phases)
	for k := range b.vsDone {
		b.w.share(k)
	}
	b.finish()
}

// runBefore runs, each whole, the phases before ph that have not run.
func (b *batch) runBefore(ph phase) {
	for ; b.at < ph; b.at++ {
		b.runSteps(b.at)
		b.steps[b.at] = nil
		b.failed.planeReported = false
	}
}

// flush runs the add phase's steps planned so far, after the phases
// before it (the binds), and keeps their storage for the next ones: a
// streaming batch calls it each time they fill a Write.
func (b *batch) flush() {
	b.runBefore(phaseAdd)
	b.runSteps(phaseAdd)
	clear(b.steps[phaseAdd])
	b.steps[phaseAdd] = b.steps[phaseAdd][:0]
}

// flushBinds runs the binds planned so far and keeps their storage for
// the next ones. Only a Resync calls it (add), before any other phase
// has run; the binds planned after it run with the rest (runBefore).
func (b *batch) flushBinds() {
	b.runSteps(phaseAddAddress)
	clear(b.steps[phaseAddAddress])
	b.steps[phaseAddAddress] = b.steps[phaseAddAddress][:0]
}

// runSteps runs the steps of phase ph planned so far.
func (b *batch) runSteps(ph phase) {
	steps := b.steps[ph]
	switch ph {
	case phaseAddAddress, phasePruneAddress:
		b.runAddresses(ph, steps)
	default:
		b.runPhase(steps)
	}
}

// writeChunk bounds the changes of one Write: a phase of a cold start
// has a change per destination, and only a chunk of them at a time is
// held as steps (flush) and materialised as Ops, not the whole phase.
// What a chunk holds (its steps, Ops and answers, the Linux adapter's
// encoding) is the same at any cluster size, so it weighs most in a
// small one's cold start, whose whole live heap is a few megabytes:
// 1,024 changes keep it under half a MiB. The Linux adapter sends a
// chunk in one system call or a few either way; the kernel's work is
// per change.
const writeChunk = 1024

// runPhase prepares one phase's steps in order and sends their changes
// in Writes of up to writeChunk changes.
func (b *batch) runPhase(steps []step) {
	if n := min(len(steps), writeChunk); cap(b.out) < n {
		b.out = make([]sent, 0, n)
	}
	out := b.out[:0]
	for i := range steps {
		s := &steps[i]
		if !b.failed.vs[s.vs.Key] {
			x, ok, err := b.prepare(s)
			switch {
			case err != nil:
				b.fail(s, err)
			case ok:
				out = append(out, x)
			}
		}
		if len(out) == writeChunk || i == len(steps)-1 && len(out) > 0 {
			b.write(out)
			clear(out)
			out = out[:0]
		}
	}
}

// prepare returns a step's IPVS change; ok is false when there is none
// to make (a retiring destination already gone or still draining). Only
// a retiring destination reads the kernel (its connection counts).
func (b *batch) prepare(s *step) (x sent, ok bool, err error) {
	k := s.vs.Key
	switch s.kind {
	case actAddVS:
		return sent{s: s, op: Op{Kind: OpAddService, VS: s.vs}}, true, nil
	case actUpdateVS:
		return sent{s: s, op: Op{Kind: OpUpdateService, VS: s.vs}}, true, nil
	case actDeleteVS:
		return sent{s: s, op: Op{Kind: OpDeleteService, VS: VirtualServer{Key: k}}}, true, nil
	case actAddDest:
		return sent{s: s, op: Op{Kind: OpAddDestination, VS: VirtualServer{Key: k}, Dest: s.dest}}, true, nil
	case actUpdateDest:
		return sent{s: s, op: Op{Kind: OpUpdateDestination, VS: VirtualServer{Key: k}, Dest: s.dest}}, true, nil
	case actRetireDest:
		return b.retireNow(s)
	}
	return sent{}, false, fmt.Errorf("%s: not an IPVS change", s.action)
}

// write sends one chunk of a phase's changes in one Write, and applies
// each answer to the mirror as it maps it back to its step.
func (b *batch) write(out []sent) {
	if cap(b.ops) < len(out) {
		b.ops = make([]Op, 0, cap(b.out))
	}
	ops := b.ops[:len(out)]
	for i, x := range out {
		ops[i] = x.op
	}
	errs := b.w.kernel.Write(ops)
	clear(ops)
	for i, x := range out {
		var kerr error
		if i < len(errs) {
			kerr = errs[i]
		} else {
			kerr = fmt.Errorf("%w: the kernel answered %d of %d changes", ErrUnanswered, len(errs), len(ops))
		}
		b.w.ops[x.op.Kind.String()]++
		err := b.applyAnswer(x, kerr)
		if err == nil {
			continue
		}
		if kerr != nil {
			b.w.ops["error"]++ // the kernel's; applyAnswer counts its own calls' (conntrack)
		}
		b.answerFailed(x.s, err)
	}
}

// applyAnswer applies the kernel's answer to one change to the mirror
// (and to the drains and stale deletions it concerns), and returns the
// error to report: nil for none, and for deleting what is already gone.
func (b *batch) applyAnswer(x sent, kerr error) error {
	w, k, d := b.w, x.op.VS.Key, x.op.Dest
	w.drift.count.touch(k)
	switch x.op.Kind {
	case OpAddService:
		if kerr != nil {
			return fmt.Errorf("add virtual server %s: %w", k, kerr)
		}
		a := &actual{vs: x.op.VS, managed: true}
		if want := w.desired[k]; want != nil {
			// Its destinations follow in the desired list's order: the
			// mirror's list is that list's start, longer by one with each
			// answer (actual.put), and nothing is copied.
			a.dests, a.shared = want.dests[:0], true
		} else {
			// Sized for the destinations that follow: one at a time, they
			// would grow it past that (benchmarks/NOTES.md, memory).
			a.dests = make(destList, 0, x.s.dests)
		}
		w.mirror[k] = a
	case OpUpdateService:
		if kerr != nil {
			return fmt.Errorf("update virtual server %s: %w", k, kerr)
		}
		w.mirror[k].vs = x.op.VS
	case OpDeleteService:
		if err := gone(kerr, syscall.ESRCH); err != nil {
			if svcs := x.s.services(); len(svcs) > 0 {
				w.stale[k] = svcs[0] // retried with the service
			}
			return fmt.Errorf("delete virtual server %s: %w", k, err)
		}
		delete(w.stale, k)
		delete(w.mirror, k)
		delete(w.draining, k)
	case OpAddDestination, OpUpdateDestination:
		verb := "update"
		switch {
		case x.drain:
			verb = "drain"
		case x.op.Kind == OpAddDestination:
			verb = "add"
		}
		if kerr != nil {
			return fmt.Errorf("%s destination %s of virtual server %s: %w", verb, d.AddrPort(), k, kerr)
		}
		// Its virtual server may have been added in the same Write: it
		// is looked up once the kernel has answered.
		a := w.mirror[k]
		if a == nil {
			return fmt.Errorf("%s destination %s of virtual server %s: virtual server missing", verb, d.AddrPort(), k)
		}
		a.put(d)
		if _, draining := w.draining[k][d.AddrPort()]; x.drain && !draining {
			w.setDrain(k, d.AddrPort(), b.now)
		}
	case OpDeleteDestination:
		return b.deleted(k, d.AddrPort(), kerr)
	}
	return nil
}

// runAddresses binds (phaseAddAddress) or unbinds the addresses of a
// phase's steps in one Links call, which the Linux adapter makes in as
// few system calls as its socket allows; each address's answer is its
// step's alone, applied to the mirror of the interface's addresses.
func (b *batch) runAddresses(ph phase, steps []step) {
	if len(steps) == 0 {
		return
	}
	w, add := b.w, ph == phaseAddAddress
	ps := make([]netip.Prefix, len(steps))
	for i, s := range steps {
		ps[i] = s.addr
	}
	kind, verb, prep := "add-address", "add", "to"
	var errs []error
	if add {
		errs = w.links.AddAddrs(w.cfg.Interface, ps)
	} else {
		kind, verb, prep = "delete-address", "delete", "from"
		errs = w.links.DelAddrs(w.cfg.Interface, ps)
	}
	for i := range steps {
		s := &steps[i]
		w.ops[kind]++
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = fmt.Errorf("%w: %d answers for %d addresses", ErrUnanswered, len(errs), len(ps))
		}
		if !add {
			err = gone(err, syscall.EADDRNOTAVAIL)
		}
		if err != nil {
			w.ops["error"]++
			b.fail(s, fmt.Errorf("%s address %s %s %s: %w", verb, s.addr, prep, w.cfg.Interface, err))
			continue
		}
		if add {
			w.bound[s.addr.Addr().Unmap()] = uint8(s.addr.Bits())
		} else {
			delete(w.bound, s.addr.Addr().Unmap())
		}
	}
}

// answerFailed records the failure of a change in a Write: reported as
// fail does, unless it repeats what this run reported already (the same
// lost answer, or its virtual server's first failure in this Write),
// when its services are only blamed.
func (b *batch) answerFailed(s *step, err error) {
	plane := planeWide(err)
	if (plane && b.failed.planeReported) || (!plane && s.vs.Key.Address.IsValid() && b.failed.vs[s.vs.Key]) {
		b.blameStep(s)
		return
	}
	b.failed.planeReported = b.failed.planeReported || plane
	b.fail(s, err)
}

// fail records a step's failure: its virtual server's later steps are
// skipped, its services blamed, and the error reported as theirs, or as
// the whole data plane's (which asks for a Resync).
func (b *batch) fail(s *step, err error) {
	b.blameStep(s)
	svcs := s.services()
	if len(svcs) == 0 || planeWide(err) {
		b.errs = append(b.errs, err)
		b.w.needsResync = true
		return
	}
	for _, svc := range svcs {
		b.errs = append(b.errs, serviceError(svc, ReasonKernelError, err))
	}
}

// blameStep marks a failed step's virtual server and blames its
// services.
func (b *batch) blameStep(s *step) {
	if s.vs.Key.Address.IsValid() {
		b.failed.vs[s.vs.Key] = true
	}
	for _, svc := range s.services() {
		b.blame(svc)
	}
}

// retireNow decides, from the destination's current connection counts
// (read at once, for TCP) and its drain, whether to delete it or drain
// it (retireDecision), and returns that change; ok is false when there
// is nothing to change.
func (b *batch) retireNow(s *step) (x sent, ok bool, err error) {
	w, k, d := b.w, s.vs.Key, s.dest.AddrPort()
	a := w.mirror[k]
	if a == nil {
		w.forgetDrain(k, d)
		return sent{}, false, nil
	}
	if gracefulTermination(k.Protocol) {
		if err := b.refresh(a); err != nil {
			return sent{}, false, err
		}
	}
	cur, present := a.dests.get(d)
	since, draining := w.draining[k][d]
	switch retireDecision(k.Protocol, cur, present, drainState{since, draining}, b.now, w.cfg.GracefulPeriod) {
	case retireForget:
		w.forgetDrain(k, d)
		return sent{}, false, nil
	case retireDelete:
		if !present {
			cur = Destination{Addr: d.Addr(), Port: d.Port()}
		}
		return sent{s: s, op: Op{Kind: OpDeleteDestination, VS: VirtualServer{Key: k}, Dest: cur}}, true, nil
	case retireWait:
		if !draining {
			w.setDrain(k, d, b.now)
		}
		return sent{}, false, nil
	}
	cur.Weight = 0
	return sent{s: s, op: Op{Kind: OpUpdateDestination, VS: VirtualServer{Key: k}, Dest: cur}, drain: true}, true, nil
}

// refresh re-reads a virtual server's destinations, for their current
// connection counts, once per batch.
func (b *batch) refresh(a *actual) error {
	k := a.vs.Key
	if b.fresh[k] {
		return nil
	}
	ds, err := b.w.kernel.Destinations(k)
	if err != nil {
		return fmt.Errorf("list destinations of virtual server %s: %w", k, err)
	}
	a.setDests(newDestList(ds))
	b.fresh[k] = true
	return nil
}

// deleted applies the kernel's answer to a destination's deletion: gone
// from the mirror and from the drains. Its UDP flows are not deleted
// here: as in kube-proxy, the conntrack reconciler (package
// proxier/udpflows) deletes the flows of endpoints that no longer serve,
// after the sync, and keeps those of serving-terminating endpoints.
func (b *batch) deleted(k Key, d netip.AddrPort, err error) error {
	w := b.w
	if err := gone(err, syscall.ENOENT, syscall.ESRCH); err != nil {
		return fmt.Errorf("delete destination %s of virtual server %s: %w", d, k, err)
	}
	if a := w.mirror[k]; a != nil {
		a.remove(d)
	}
	w.forgetDrain(k, d)
	return nil
}
