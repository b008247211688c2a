package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// phase orders a batch's steps: every add, then every update, then every
// prune, so a virtual server never loses its old destinations before it
// has its new ones.
type phase int

const (
	phaseAddAddress phase = iota // a VIP is bound before its virtual servers exist
	phaseAdd
	phaseUpdate
	phasePrune
	phasePruneAddress // and unbound after they are gone
	phases
)

// step is one kernel change (or a drain check, which may make one),
// planned by diffing the mirror against the desired state. Its run does
// at once what cannot wait (reads, addresses) and returns the IPVS
// change, if any, which the batch sends with the others of its phase in
// one Kernel.Write (run, below).
type step struct {
	phase phase
	key   Key                 // the virtual server; zero for address steps
	svcs  []policy.ServiceKey // blamed (retried with backoff) on failure
	run   func() (*change, error)
	// addr is an address step's address, bound or unbound with the
	// others of its phase in one Links call (runAddresses); run is nil.
	addr netip.Prefix
}

// batch collects the steps of one Apply or Resync and runs them.
type batch struct {
	w        *Writer
	now      time.Time
	steps    [phases][]step             // by phase, each in the order planned
	services map[policy.ServiceKey]bool // reconciled: a retry is cleared or scheduled
	blamed   map[policy.ServiceKey]bool
	vsDone   map[Key]bool
	addrDone map[netip.Addr]bool
	fresh    map[Key]bool // destinations re-read from the kernel in this batch
	errs     []error
	scratch  []action // the reconciler's answer for one object, reused

	// Touched by the services of this batch, reconciled by plan once
	// every service's desired state is recorded.
	pendingVS   []Key
	vsBy        map[Key]policy.ServiceKey
	pendingAddr []netip.Addr
	addrBy      map[netip.Addr][]policy.ServiceKey
	svcLists    map[policy.ServiceKey][]policy.ServiceKey // see svcs
}

func (w *Writer) newBatch(now time.Time) *batch {
	return &batch{
		w: w, now: now,
		services: map[policy.ServiceKey]bool{}, blamed: map[policy.ServiceKey]bool{},
		vsDone: map[Key]bool{}, addrDone: map[netip.Addr]bool{}, fresh: map[Key]bool{},
		vsBy: map[Key]policy.ServiceKey{}, addrBy: map[netip.Addr][]policy.ServiceKey{},
		svcLists: map[policy.ServiceKey][]policy.ServiceKey{},
	}
}

func (b *batch) add(s step) { b.steps[s.phase] = append(b.steps[s.phase], s) }

// expect makes room for n more steps of phase ph (a Resync knows how
// many adds its plan may need, and growing a large slice one append at a
// time is a large part of a cold Resync).
func (b *batch) expect(ph phase, n int) { b.steps[ph] = slices.Grow(b.steps[ph], n) }

func (b *batch) blame(svc policy.ServiceKey) {
	if svc == (policy.ServiceKey{}) {
		return
	}
	b.services[svc] = true
	b.blamed[svc] = true
}

// service records a service's new virtual servers and notes its old and
// new virtual servers and their addresses for plan.
func (b *batch) service(svc policy.ServiceKey, vss []policy.VirtualServer) {
	touched, addrs, errs := b.w.setDesired(svc, vss)
	b.reconcile(svc, touched, addrs, errs)
}

// retry reconciles a service whose last batch failed in the kernel: its
// virtual servers as last translated, and their addresses, again. A
// service with virtual servers it could not have is retried with service
// instead (Writer.retryPlans), since what blocked them may be gone.
func (b *batch) retry(svc policy.ServiceKey) {
	if vss, ok := b.w.retryPlans[svc]; ok {
		b.service(svc, vss)
		return
	}
	keys := slices.Clone(b.w.claimed[svc])
	var addrs []netip.Addr
	for _, k := range keys {
		if x := b.w.desired[k]; x != nil && x.binds() {
			addrs = append(addrs, k.Address)
		}
	}
	b.reconcile(svc, keys, addrs, nil)
}

// reconcile notes a service's touched virtual servers (and its stale
// ones) and their addresses for plan, and its errors.
func (b *batch) reconcile(svc policy.ServiceKey, touched []Key, addrs []netip.Addr, errs []error) {
	b.services[svc] = true
	var stale []Key
	for k, s := range b.w.stale {
		if s == svc {
			stale = append(stale, k)
		}
	}
	slices.SortFunc(stale, Key.Compare)
	touched = append(touched, stale...)
	if len(errs) > 0 {
		b.errs = append(b.errs, errs...) // *ServiceError: the service's alone
		b.blame(svc)
	}
	for _, k := range touched {
		if _, ok := b.vsBy[k]; !ok {
			b.pendingVS = append(b.pendingVS, k)
		}
		b.vsBy[k] = svc
	}
	for _, a := range addrs {
		if _, ok := b.addrBy[a]; !ok {
			b.pendingAddr = append(b.pendingAddr, a)
		}
		if !slices.Contains(b.addrBy[a], svc) {
			b.addrBy[a] = append(b.addrBy[a], svc)
		}
	}
}

// plan diffs what the batch's services touched. Their old virtual
// servers were ours, so those no longer planned are deleted.
func (b *batch) plan() {
	for _, k := range b.pendingVS {
		b.virtualServer(k, b.vsBy[k], true)
	}
	for _, a := range b.pendingAddr {
		b.address(a, b.addrBy[a]...)
	}
}

// virtualServer plans the changes that make one kernel virtual server
// match its desired state (reconcileVS). Without a desired state it is
// deleted if mayDelete (it is ours) and it is not excluded. The Writer's
// own bookkeeping is done here, before the changes are run: a planned
// virtual server is no longer stale, one present is managed, a planned
// destination no longer drains, and one no longer ours to delete is no
// longer ours to drain either.
func (b *batch) virtualServer(k Key, svc policy.ServiceKey, mayDelete bool) {
	if b.vsDone[k] {
		return
	}
	b.vsDone[k] = true
	w := b.w
	want, have := w.desired[k], w.mirror[k]
	excluded := w.excluded(k.Address)
	switch {
	case want != nil:
		delete(w.stale, k)
		svc = want.svc
		if have != nil {
			have.managed = true
			for _, d := range want.dests {
				w.forgetDrain(k, d.AddrPort())
			}
		}
	case have != nil && (!mayDelete || excluded):
		delete(w.draining, k)
	}
	b.scratch = reconcileVS(b.scratch[:0], k, want, have, mayDelete, excluded)
	for _, a := range b.scratch {
		b.add(b.stepFor(a, svc))
	}
}

// stepFor makes the step that runs action a for service svc (blamed if
// it fails): its change, and what the kernel's answer does to the
// mirror.
func (b *batch) stepFor(a action, svc policy.ServiceKey) step {
	w, k := b.w, a.vs.Key
	s := step{phase: a.phase(), key: k, svcs: b.svcs(svc)}
	switch a.kind {
	case actBind, actUnbind:
		s.key, s.addr = Key{}, a.addr
	case actDeleteVS:
		s.run = func() (*change, error) {
			return &change{op: Op{Kind: OpDeleteService, VS: VirtualServer{Key: k}}, done: func(err error) error {
				if err := gone(err, syscall.ESRCH); err != nil {
					if svc != (policy.ServiceKey{}) {
						w.stale[k] = svc // retried with the service
					}
					return fmt.Errorf("delete virtual server %s: %w", k, err)
				}
				delete(w.stale, k)
				delete(w.mirror, k)
				delete(w.draining, k)
				return nil
			}}, nil
		}
	case actAddVS:
		vs, n := a.vs, a.dests
		s.run = func() (*change, error) {
			return &change{op: Op{Kind: OpAddService, VS: vs}, done: func(err error) error {
				if err != nil {
					return fmt.Errorf("add virtual server %s: %w", k, err)
				}
				// Sized for the destinations that follow: one at a time,
				// they would grow it past that (benchmarks/NOTES.md, memory).
				w.mirror[k] = &actual{vs: vs, managed: true, dests: make(destList, 0, n)}
				return nil
			}}, nil
		}
	case actUpdateVS:
		vs := a.vs
		s.run = func() (*change, error) {
			return &change{op: Op{Kind: OpUpdateService, VS: vs}, done: func(err error) error {
				if err != nil {
					return fmt.Errorf("update virtual server %s: %w", k, err)
				}
				w.mirror[k].vs = vs
				return nil
			}}, nil
		}
	case actAddDest, actUpdateDest:
		s.run = b.destination(a)
	case actRetireDest:
		d := a.dest.AddrPort()
		s.run = func() (*change, error) { return b.retireNow(k, d) }
	}
	return s
}

// destination is the run of adding or updating one planned destination.
func (b *batch) destination(a action) func() (*change, error) {
	w, k, d := b.w, a.vs.Key, a.dest
	kind, verb := OpUpdateDestination, "update"
	if a.kind == actAddDest {
		kind, verb = OpAddDestination, "add"
	}
	return func() (*change, error) {
		// Its virtual server may be added in the same Write: it is
		// looked up in the mirror once the kernel has answered.
		return &change{op: Op{Kind: kind, VS: VirtualServer{Key: k}, Dest: d}, done: func(err error) error {
			if err != nil {
				return fmt.Errorf("%s destination %s of virtual server %s: %w", verb, d.AddrPort(), k, err)
			}
			a := w.mirror[k]
			if a == nil {
				return fmt.Errorf("%s destination %s of virtual server %s: virtual server missing", verb, d.AddrPort(), k)
			}
			a.put(d)
			return nil
		}}, nil
	}
}

// address plans adding a dummy address that a planned virtual server
// binds, or deleting one that none binds (reconcileAddr).
func (b *batch) address(a netip.Addr, by ...policy.ServiceKey) {
	if b.addrDone[a] {
		return
	}
	b.addrDone[a] = true
	p, has := b.w.bound[a]
	b.scratch = reconcileAddr(b.scratch[:0], a, b.w.addrRefs[a], p, has)
	for _, x := range b.scratch {
		s := b.stepFor(x, policy.ServiceKey{})
		s.svcs = by
		b.add(s)
	}
}

// runAddresses binds (phaseAddAddress) or unbinds the addresses of a
// phase's steps in one Links call, which the Linux adapter makes in as
// few system calls as its socket allows; each address's answer is its
// step's alone.
func (b *batch) runAddresses(ph phase, steps []step, failed map[Key]bool) {
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
	for i, s := range steps {
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
			b.fail(s, fmt.Errorf("%s address %s %s %s: %w", verb, s.addr, prep, w.cfg.Interface, err), failed)
			continue
		}
		if add {
			w.bound[s.addr.Addr().Unmap()] = s.addr
		} else {
			delete(w.bound, s.addr.Addr().Unmap())
		}
	}
}

// finish clears the retry of each reconciled service that succeeded and
// schedules one for each that failed.
func (b *batch) finish() {
	for svc := range b.services {
		if b.blamed[svc] {
			b.w.scheduleRetry(svc, b.now)
		} else {
			delete(b.w.failed, svc)
		}
	}
}

// svcs is the list of one service a step blames, shared by its steps: a
// cold start has a step per destination.
func (b *batch) svcs(svc policy.ServiceKey) []policy.ServiceKey {
	if svc == (policy.ServiceKey{}) {
		return nil
	}
	l, ok := b.svcLists[svc]
	if !ok {
		l = []policy.ServiceKey{svc}
		b.svcLists[svc] = l
	}
	return l
}

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
		if ph := phase(ph); ph == phaseAddAddress || ph == phasePruneAddress {
			b.runAddresses(ph, b.steps[ph], failed)
		} else {
			b.runPhase(b.steps[ph], failed)
		}
		b.steps[ph] = nil // their closures hold what they program
	}
	for k := range b.vsDone {
		b.w.share(k)
	}
	b.finish()
}

// writeChunk bounds the changes of one Write: a phase of a cold start
// holds a change per destination, and only a chunk of them at a time
// is materialised (an Op, its answer's callback), not the whole phase.
// The Linux adapter sends a chunk in a few system calls anyway.
const writeChunk = 4096

// runPhase runs one phase's steps in order and sends their changes in
// Writes of up to writeChunk changes.
func (b *batch) runPhase(steps []step, failed map[Key]bool) {
	out := make([]sent, 0, min(len(steps), writeChunk))
	planeReported := false // one report of a plane-wide failure a phase
	for i, s := range steps {
		if !s.key.Address.IsValid() || !failed[s.key] {
			if c, err := s.run(); err != nil {
				b.fail(s, err, failed)
			} else if c != nil {
				out = append(out, sent{s, c})
			}
		}
		if len(out) == writeChunk || i == len(steps)-1 && len(out) > 0 {
			b.write(out, failed, &planeReported)
			clear(out) // their callbacks hold what they program
			out = out[:0]
		}
	}
}

// write sends one chunk of a phase's changes in one Write and hands each
// its answer.
func (b *batch) write(out []sent, failed map[Key]bool, planeReported *bool) {
	ops := make([]Op, len(out))
	for i, x := range out {
		ops[i] = x.c.op
	}
	errs := b.w.kernel.Write(ops)
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
		if (plane && *planeReported) || (!plane && x.s.key.Address.IsValid() && failed[x.s.key]) {
			// Already reported: the same lost answer, or its virtual
			// server's first failure in this Write.
			b.blameAll(x.s, failed)
			continue
		}
		*planeReported = *planeReported || plane
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
		b.w.needsResync = true
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
