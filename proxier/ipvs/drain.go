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
// SCTP destinations are deleted at once; for UDP the conntrack entries
// replying from the endpoint are deleted too, so that clients' flows are
// not kept pinned to a dead endpoint (kubernetes/kubernetes#71514).

// retire plans the removal of a destination that left the plan.
func (b *batch) retire(k Key, svc policy.ServiceKey, d netip.AddrPort) {
	b.add(step{phase: phasePrune, key: k, svcs: svcs(svc), run: func() error { return b.retireNow(k, d) }})
}

func (b *batch) retireNow(k Key, d netip.AddrPort) error {
	w := b.w
	a := w.mirror[k]
	if a == nil {
		w.forgetDrain(k, d)
		return nil
	}
	if !gracefulTermination(k.Protocol) {
		return b.deleteDestination(a, d)
	}
	if err := b.refresh(a); err != nil {
		return err
	}
	cur, ok := a.dests.get(d)
	if !ok {
		w.forgetDrain(k, d)
		return nil
	}
	since, draining := w.draining[k][d]
	expired := draining && !b.now.Before(since.Add(w.cfg.GracefulPeriod))
	if cur.ActiveConns+cur.InactiveConns == 0 || expired {
		return b.deleteDestination(a, d)
	}
	if cur.Weight != 0 {
		cur.Weight = 0
		if err := w.call("update-destination", func() error { return w.kernel.UpdateDestination(k, cur) }); err != nil {
			return fmt.Errorf("drain destination %s of virtual server %s: %w", d, k, err)
		}
		a.put(cur)
	}
	if !draining {
		w.setDrain(k, d, b.now)
	}
	return nil
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

// deleteDestination deletes a destination now; for UDP it then deletes
// the conntrack entries whose reply comes from the endpoint.
func (b *batch) deleteDestination(a *actual, d netip.AddrPort) error {
	w, k := b.w, a.vs.Key
	dest, ok := a.dests.get(d)
	if !ok {
		dest = Destination{Addr: d.Addr(), Port: d.Port()}
	}
	if err := w.call("delete-destination", func() error {
		return gone(w.kernel.DeleteDestination(k, dest), syscall.ENOENT, syscall.ESRCH)
	}); err != nil {
		return fmt.Errorf("delete destination %s of virtual server %s: %w", d, k, err)
	}
	a.remove(d)
	w.forgetDrain(k, d)
	if k.Protocol != policy.ProtocolUDP {
		return nil
	}
	if err := w.call("flush-conntrack", func() error { _, err := w.ct.DeleteUDP(d); return err }); err != nil {
		return fmt.Errorf("delete conntrack entries of UDP endpoint %s: %w", d, err)
	}
	return nil
}

// drains plans a check of every virtual server with draining
// destinations that the batch has not reconciled already.
func (b *batch) drains() {
	for _, k := range slices.SortedFunc(maps.Keys(b.w.draining), Key.Compare) {
		var svc policy.ServiceKey
		if x := b.w.want[k]; x != nil {
			svc = x.svc
		}
		b.virtualServer(k, svc, false)
	}
}
