package ipvs

import (
	"maps"
	"net/netip"
	"slices"
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

// step is one action of the reconciler (reconcile.go) with the services
// it blames if it fails: a kernel change, or a drain check, which may
// make one. The executor (execute.go) runs the steps of a phase in
// order.
type step struct {
	action
	// The services blamed (retried with backoff) on failure: a virtual
	// server's one service (none: zero), or an address's services (by).
	svc policy.ServiceKey
	by  []policy.ServiceKey
}

// services returns the services a step blames; a virtual server's one
// is put in a list only here, when its step failed.
func (s *step) services() []policy.ServiceKey {
	if s.by != nil || s.svc == (policy.ServiceKey{}) {
		return s.by
	}
	return []policy.ServiceKey{s.svc}
}

// batch collects the steps of one Apply or Resync and runs them
// (execute.go).
type batch struct {
	w        *Writer
	now      time.Time
	steps    [phases][]step // by phase, each in the order planned and not yet run
	scratch  []action       // the reconciler's answer for one object, reused
	errs     []error
	progress // the executor's place in the run (execute.go)
	outcome
	pending
	done
}

// outcome is what becomes of the batch's services once it has run: a
// retry cleared or scheduled (finish).
type outcome struct {
	services map[policy.ServiceKey]bool // reconciled
	blamed   map[policy.ServiceKey]bool // a step of theirs failed
}

// pending is what the batch's services touched, reconciled by plan once
// every service's desired state is recorded. A batch that reconciles
// every virtual server (allVS: a Resync's) notes none of them.
type pending struct {
	allVS       bool
	pendingVS   []Key
	vsBy        map[Key]policy.ServiceKey
	pendingAddr []netip.Addr
	addrBy      map[netip.Addr][]policy.ServiceKey
}

// done is what the batch has reconciled or read already: each virtual
// server and address once, each virtual server's destinations re-read
// from the kernel at most once.
type done struct {
	vsDone   map[Key]bool
	addrDone map[netip.Addr]bool
	fresh    map[Key]bool
}

func (w *Writer) newBatch(now time.Time) *batch {
	return &batch{
		w: w, now: now,
		outcome:  outcome{services: map[policy.ServiceKey]bool{}, blamed: map[policy.ServiceKey]bool{}},
		pending:  pending{vsBy: map[Key]policy.ServiceKey{}, addrBy: map[netip.Addr][]policy.ServiceKey{}},
		done:     done{vsDone: map[Key]bool{}, addrDone: map[netip.Addr]bool{}, fresh: map[Key]bool{}},
		progress: progress{failed: failures{vs: map[Key]bool{}}},
	}
}

// add keeps a step for its phase. Once the adds stream (streamAdds), a
// Write's worth of them runs at once (flush), so that a cold start holds
// one Write of its changes at a time, not a step per destination of the
// whole table. A Resync's binds run a Write's worth at a time too
// (flushBinds), as they are planned: binds come before every other
// phase, and a cold start binds every address of the table.
func (b *batch) add(s step) {
	ph := s.phase()
	b.steps[ph] = append(b.steps[ph], s)
	switch {
	case b.stream && ph == phaseAdd && len(b.steps[ph]) == writeChunk:
		b.flush()
	case b.allVS && ph == phaseAddAddress && len(b.steps[ph]) == writeChunk:
		b.flushBinds()
	}
}

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
	if b.allVS {
		touched = nil // planned with every other virtual server
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

// plan diffs what the batch's services touched: their addresses, then,
// the adds streaming, their virtual servers.
func (b *batch) plan() {
	b.planAddresses()
	b.streamAdds()
	b.planVirtualServers()
}

// planAddresses diffs the addresses the batch's services touched.
func (b *batch) planAddresses() {
	for _, a := range b.pendingAddr {
		b.address(a, b.addrBy[a]...)
	}
}

// streamAdds lets the add phase run while the batch is still planning,
// a Write's worth at a time (add): the binds run first, so every address
// the batch binds must have been planned.
func (b *batch) streamAdds() { b.stream = true }

// planVirtualServers diffs the virtual servers the batch's services
// touched. Their old virtual servers were ours, so those no longer
// planned are deleted.
func (b *batch) planVirtualServers() {
	for _, k := range b.pendingVS {
		b.virtualServer(k, b.vsBy[k], true)
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
		b.add(step{action: a, svc: svc})
	}
}

// address plans adding a dummy address that a planned virtual server
// binds, or deleting one that none binds (reconcileAddr).
func (b *batch) address(a netip.Addr, by ...policy.ServiceKey) {
	if b.addrDone[a] {
		return
	}
	b.addrDone[a] = true
	bits, has := b.w.bound[a]
	b.scratch = reconcileAddr(b.scratch[:0], a, b.w.addrRefs[a], netip.PrefixFrom(a, int(bits)), has)
	for _, x := range b.scratch {
		b.add(step{action: x, by: by})
	}
}

// finish clears the retry of each reconciled service that succeeded and
// schedules one for each that failed.
func (b *batch) finish() {
	for svc := range b.services {
		if b.blamed[svc] {
			b.w.retries.failedAt(svc, b.now)
		} else {
			b.w.retries.succeeded(svc)
		}
	}
}

// Graceful termination. A TCP destination that leaves the plan is set to
// weight 0 (no new connections) and deleted once it has no active or
// inactive connections, or when Config.GracefulPeriod has passed since it
// left. Every Apply and Resync checks the draining destinations. UDP and
// SCTP destinations are deleted at once; their UDP flows are the
// conntrack reconciler's (package proxier/udpflows), after the sync.
// retireDecision (reconcile.go) decides; the executor (retireNow,
// execute.go) reads the connection counts and makes the change.

// drains plans a check of every virtual server with draining
// destinations that the batch has not reconciled already.
func (b *batch) drains() {
	for _, k := range slices.SortedFunc(maps.Keys(b.w.draining), Key.Compare) {
		var svc policy.ServiceKey
		if x := b.w.desired[k]; x != nil {
			svc = x.svc
		}
		b.virtualServer(k, svc, false)
	}
}
