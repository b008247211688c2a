package ipvs

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"syscall"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// Graceful termination. A TCP destination that leaves the plan is set to
// weight 0 (no new connections) and deleted once it has no active or
// inactive connections, or when Config.GracefulPeriod has passed since it
// left. Every Apply and Resync checks the draining destinations. UDP and
// SCTP destinations are deleted at once. The Writer deletes no conntrack
// entry: as in kube-proxy, the UDP flows of endpoints that no longer
// serve are deleted after the sync, by the conntrack reconciler
// (package proxier/udpflows), which keeps those of serving-terminating
// endpoints.

// retire plans the removal of a destination that left the plan.
func (b *batch) retire(k Key, svc policy.ServiceKey, d netip.AddrPort) {
	b.add(step{phase: phasePrune, key: k, svcs: b.svcs(svc), run: func() (*change, error) { return b.retireNow(k, d) }})
}

// retireNow decides, from the destination's current connection counts
// (read at once), whether to delete it or drain it, and returns that
// change; nil when there is nothing to change.
func (b *batch) retireNow(k Key, d netip.AddrPort) (*change, error) {
	w := b.w
	a := w.mirror[k]
	if a == nil {
		w.forgetDrain(k, d)
		return nil, nil
	}
	if !gracefulTermination(k.Protocol) {
		return b.deleteDestination(a, d), nil
	}
	if err := b.refresh(a); err != nil {
		return nil, err
	}
	cur, ok := a.dests.get(d)
	if !ok {
		w.forgetDrain(k, d)
		return nil, nil
	}
	since, draining := w.draining[k][d]
	expired := draining && !b.now.Before(since.Add(w.cfg.GracefulPeriod))
	if cur.ActiveConns+cur.InactiveConns == 0 || expired {
		return b.deleteDestination(a, d), nil
	}
	if cur.Weight == 0 {
		if !draining {
			w.setDrain(k, d, b.now)
		}
		return nil, nil
	}
	cur.Weight = 0
	return &change{op: Op{Kind: OpUpdateDestination, VS: VirtualServer{Key: k}, Dest: cur}, done: func(err error) error {
		if err != nil {
			return fmt.Errorf("drain destination %s of virtual server %s: %w", d, k, err)
		}
		a.put(cur)
		if !draining {
			w.setDrain(k, d, b.now)
		}
		return nil
	}}, nil
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

// deleteDestination is the deletion of a destination.
func (b *batch) deleteDestination(a *actual, d netip.AddrPort) *change {
	k := a.vs.Key
	dest, ok := a.dests.get(d)
	if !ok {
		dest = Destination{Addr: d.Addr(), Port: d.Port()}
	}
	return &change{op: Op{Kind: OpDeleteDestination, VS: VirtualServer{Key: k}, Dest: dest}, done: func(err error) error {
		return b.deleted(a, d, err)
	}}
}

// deleted records the kernel's answer to a destination's deletion.
func (b *batch) deleted(a *actual, d netip.AddrPort, err error) error {
	w, k := b.w, a.vs.Key
	if err := gone(err, syscall.ENOENT, syscall.ESRCH); err != nil {
		return fmt.Errorf("delete destination %s of virtual server %s: %w", d, k, err)
	}
	a.remove(d)
	w.forgetDrain(k, d)
	return nil
}

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
