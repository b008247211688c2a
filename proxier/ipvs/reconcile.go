package ipvs

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/policy"
)

// The reconciler: what to change so that one kernel object matches its
// desired state, decided from the desired state and the mirror alone. It
// reads no kernel and no clock (the drain decision takes the time as an
// argument) and changes nothing: the batch (batch.go) runs what it
// returns, phase by phase, and applies the kernel's answers to the
// mirror.

// actionKind is what one action does.
type actionKind uint8

const (
	actBind       actionKind = iota + 1 // bind a VIP on the dummy interface
	actAddVS                            // add a virtual server
	actAddDest                          // add a destination
	actUpdateVS                         // change a virtual server's scheduler, flags or timeout
	actUpdateDest                       // change a destination's weight (or forwarding method back to NAT)
	actDeleteVS                         // delete a virtual server
	actRetireDest                       // drain or delete a destination that left the plan (retireDecision)
	actUnbind                           // unbind a VIP no planned virtual server uses
)

var actionNames = [...]string{
	actBind: "bind", actAddVS: "add-vs", actAddDest: "add-dest", actUpdateVS: "update-vs",
	actUpdateDest: "update-dest", actDeleteVS: "delete-vs", actRetireDest: "retire-dest", actUnbind: "unbind",
}

// action is one change the reconciler asks for. vs is the whole virtual
// server for actAddVS and actUpdateVS, and its key for every other IPVS
// action; dest is the destination of the destination actions (its
// address and port only for actRetireDest); addr is the address of
// actBind and actUnbind.
type action struct {
	kind actionKind
	vs   VirtualServer
	dest Destination
	addr netip.Prefix
	// dests is, for actAddVS, how many destination adds follow it, so
	// that its mirror is sized for them.
	dests int
}

// phase is the phase an action runs in: binds first (a VIP is bound
// before its virtual servers exist), then adds, updates and prunes, and
// unbinds last (after the virtual servers on the address are gone).
func (a action) phase() phase {
	switch a.kind {
	case actBind:
		return phaseAddAddress
	case actAddVS, actAddDest:
		return phaseAdd
	case actUpdateVS, actUpdateDest:
		return phaseUpdate
	case actDeleteVS, actRetireDest:
		return phasePrune
	}
	return phasePruneAddress
}

var phaseNames = [...]string{phaseAddAddress: "add-address", phaseAdd: "add", phaseUpdate: "update",
	phasePrune: "prune", phasePruneAddress: "prune-address"}

func (p phase) String() string {
	if p >= 0 && int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase-%d", int(p))
}

func (a action) String() string {
	name := fmt.Sprintf("action-%d", a.kind)
	if int(a.kind) < len(actionNames) && actionNames[a.kind] != "" {
		name = actionNames[a.kind]
	}
	switch a.kind {
	case actBind, actUnbind:
		return fmt.Sprintf("%s %s", name, a.addr)
	case actAddVS, actUpdateVS:
		return fmt.Sprintf("%s %s", name, a.vs)
	case actDeleteVS:
		return fmt.Sprintf("%s %s", name, a.vs.Key)
	case actRetireDest:
		return fmt.Sprintf("%s %s %s", name, a.vs.Key, a.dest.AddrPort())
	}
	return fmt.Sprintf("%s %s %s weight=%d", name, a.vs.Key, a.dest.AddrPort(), a.dest.Weight)
}

// reconcileVS appends to dst the actions that make the kernel's virtual
// server k (have; nil when the kernel has none) match its desired state
// (want; nil when no service plans it), in the order they must be made:
//   - planned and missing: it is added, then each of its destinations;
//   - planned and present: it is updated if its scheduler, flags or
//     timeout differ; a planned destination missing is added, one whose
//     weight or forwarding method differs is updated, and one no longer
//     planned is retired (drained or deleted: retireDecision);
//   - not planned and present: it is deleted only if it is ours and its
//     address is not excluded (--ipvs-exclude-cidrs); otherwise it is
//     left alone;
//   - neither: nothing.
func reconcileVS(dst []action, k Key, want *desiredVS, have *actual, ours, excluded bool) []action {
	switch {
	case want == nil && have == nil:
	case want == nil:
		if ours && !excluded {
			dst = append(dst, action{kind: actDeleteVS, vs: VirtualServer{Key: k}})
		}
	case have == nil:
		dst = append(dst, action{kind: actAddVS, vs: want.vs, dests: len(want.dests)})
		for _, d := range want.dests {
			dst = append(dst, action{kind: actAddDest, vs: VirtualServer{Key: k}, dest: d})
		}
	default:
		if have.vs != want.vs {
			dst = append(dst, action{kind: actUpdateVS, vs: want.vs})
		}
		for _, d := range want.dests {
			cur, ok := have.dests.get(d.AddrPort())
			switch {
			case !ok:
				dst = append(dst, action{kind: actAddDest, vs: VirtualServer{Key: k}, dest: d})
			case cur.Weight != d.Weight || cur.Forward != ForwardMasq:
				dst = append(dst, action{kind: actUpdateDest, vs: VirtualServer{Key: k}, dest: d})
			}
		}
		for _, d := range have.dests { // sorted
			if !want.dests.has(d.AddrPort()) {
				dst = append(dst, action{kind: actRetireDest, vs: VirtualServer{Key: k}, dest: Destination{Addr: d.Addr, Port: d.Port}})
			}
		}
	}
	return dst
}

// reconcileAddr appends to dst the action that makes the dummy
// interface's address a match its use: bound as a host prefix (/32,
// /128) while refs planned virtual servers bind it, unbound (with the
// prefix it has: one bound by hand as a /24 is unbound as a /24) once
// none does. bound is its prefix on the interface, if isBound.
func reconcileAddr(dst []action, a netip.Addr, refs int, bound netip.Prefix, isBound bool) []action {
	switch need := refs > 0; {
	case need && !isBound:
		dst = append(dst, action{kind: actBind, addr: hostPrefix(a)})
	case !need && isBound:
		dst = append(dst, action{kind: actUnbind, addr: bound})
	}
	return dst
}

// retireVerdict is what becomes of a destination that left the plan.
type retireVerdict uint8

const (
	retireForget retireVerdict = iota // gone from the kernel already: forget its drain
	retireDelete                      // delete it now
	retireDrain                       // set its weight to 0 and start its drain
	retireWait                        // weight 0 already: keep draining (its drain starts now if it had none)
)

// drainState is what the Writer knows of a retiring destination's drain:
// when it began, if it has.
type drainState struct {
	since    time.Time
	draining bool
}

// retireDecision decides the fate of a destination of a virtual server
// of protocol p that left the plan, from its state in the kernel (cur,
// read afresh for its connection counts; present false when the kernel
// no longer has it), its drain and the time now. UDP and SCTP
// destinations are deleted at once, as kube-proxy deletes them: IPVS
// drops their connections on the next packet (expire_nodest_conn), and
// they need no read. A TCP destination is deleted once it has no active
// or inactive connection, or once its drain has lasted grace; until
// then it drains at weight 0, so that it takes no new connection.
func retireDecision(p policy.Protocol, cur Destination, present bool, drain drainState, now time.Time, grace time.Duration) retireVerdict {
	switch {
	case !gracefulTermination(p):
		return retireDelete
	case !present:
		return retireForget
	case cur.ActiveConns+cur.InactiveConns == 0:
		return retireDelete
	case drain.draining && !now.Before(drain.since.Add(grace)):
		return retireDelete
	case cur.Weight == 0:
		return retireWait
	}
	return retireDrain
}
