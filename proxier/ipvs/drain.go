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
// from the mirror and from the drains, and, for UDP, the conntrack
// entries whose reply comes from the endpoint deleted too.
func (b *batch) deleted(k Key, d netip.AddrPort, err error) error {
	w := b.w
	if err := gone(err, syscall.ENOENT, syscall.ESRCH); err != nil {
		return fmt.Errorf("delete destination %s of virtual server %s: %w", d, k, err)
	}
	if a := w.mirror[k]; a != nil {
		a.remove(d)
	}
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
		if x := b.w.desired[k]; x != nil {
			svc = x.svc
		}
		b.virtualServer(k, svc, false)
	}
}
