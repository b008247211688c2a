package ipvs

import "fmt"

// change is one IPVS change a step hands its batch. done is called with
// the kernel's answer, in the order of the Write: it records a success
// in the mirror and returns the error to report, nil for none (deleting
// what is already gone is done).
type change struct {
	op   Op
	done func(err error) error
}

// sent is a step whose change is in a Write.
type sent struct {
	s step
	c *change
}

// run executes the steps phase by phase. Within a phase each step's run
// is called in order, and the IPVS changes they return go to the kernel
// together, in that order, in one Kernel.Write, which the Linux adapter
// sends in as few system calls as its socket buffers allow; the next
// phase starts once the kernel has answered them all, so a virtual
// server never loses its old destinations (prune) before its new ones
// are in (add). A failed step blames its services, which are retried
// with backoff, and skips its virtual server's steps in later phases;
// every other step still runs. The changes of a virtual server that
// were in the same Write as its failed one were made or refused by the
// kernel on their own: a success is recorded, and a failure, which
// follows from the first (the destinations of a virtual server the
// kernel refused to add are ESRCH), is counted but not reported again.
// The failure is the services' alone (a *ServiceError each) unless it
// leaves the whole data plane unknown (planeWide) or belongs to no
// service: then it asks for a Resync.
func (b *batch) run() {
	failed := map[Key]bool{}
	for ph := range b.steps {
		b.runPhase(b.steps[ph], failed)
		b.steps[ph] = nil // their closures hold what they program
	}
	for k := range b.vsDone {
		b.w.share(k)
	}
	b.finish()
}

// runPhase runs one phase's steps and sends their changes in one Write.
func (b *batch) runPhase(steps []step, failed map[Key]bool) {
	var out []sent
	for _, s := range steps {
		if s.key.Address.IsValid() && failed[s.key] {
			continue
		}
		c, err := s.run()
		if err != nil {
			b.fail(s, err, failed)
			continue
		}
		if c != nil {
			out = append(out, sent{s, c})
		}
	}
	if len(out) == 0 {
		return
	}
	ops := make([]Op, len(out))
	for i, x := range out {
		ops[i] = x.c.op
	}
	errs := b.w.kernel.Write(ops)
	planeReported := false
	for i, x := range out {
		var kerr error
		if i < len(errs) {
			kerr = errs[i]
		} else {
			kerr = fmt.Errorf("%w: the kernel answered %d of %d changes", ErrUnanswered, len(errs), len(ops))
		}
		b.w.ops[x.c.op.Kind.String()]++
		err := x.c.done(kerr)
		if err == nil {
			continue
		}
		if kerr != nil {
			b.w.ops["error"]++ // the kernel's; done counts its own calls' (conntrack)
		}
		plane := planeWide(err)
		if (plane && planeReported) || (!plane && x.s.key.Address.IsValid() && failed[x.s.key]) {
			// Already reported: the same lost answer, or its virtual
			// server's first failure in this Write.
			b.blameAll(x.s, failed)
			continue
		}
		planeReported = planeReported || plane
		b.fail(x.s, err, failed)
	}
}

// fail records a step's failure: its virtual server's later steps are
// skipped, its services blamed, and the error reported as theirs, or as
// the whole data plane's.
func (b *batch) fail(s step, err error, failed map[Key]bool) {
	b.blameAll(s, failed)
	if len(s.svcs) == 0 || planeWide(err) {
		b.errs = append(b.errs, err)
		b.w.full = true
		return
	}
	for _, svc := range s.svcs {
		b.errs = append(b.errs, serviceError(svc, ReasonKernelError, err))
	}
}

// blameAll marks a failed step's virtual server and blames its services.
func (b *batch) blameAll(s step, failed map[Key]bool) {
	if s.key.Address.IsValid() {
		failed[s.key] = true
	}
	for _, svc := range s.svcs {
		b.blame(svc)
	}
}
