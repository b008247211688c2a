package policy

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Ownership: a virtual server (address:port/protocol) belongs to exactly
// one service, decided here and nowhere else, the same way for a full
// sync and for an incremental one. Several services may claim one key: a
// Service's externalIPs entry or load-balancer ingress IP can be any
// address, including another Service's ClusterIP, and two NodePort
// services cannot collide but an externalIP can sit on a node address.
//
// The rule goes by who may write the address. A ClusterIP or NodePort
// claim, allocated by the apiserver and unique, beats a load-balancer
// ingress IP (status.loadBalancer, written only by a controller holding
// services/status), which beats a spec.externalIPs entry (any editor of
// the namespace); among equals the oldest Service (creationTimestamp)
// wins, then namespace/name. An external or load-balancer address that
// is any Service's ClusterIP is not claimed at all (addresses.go): the
// address belongs to its Service whole, on every port. The engine keeps the claim index (key → claimants,
// owner first), so that when the owner goes, or changes its ports, the
// next claimant takes over in the same batch: Reassigned names the
// services whose plans that changes, and a losing service's plan carries
// a Warning per lost virtual server instead of the virtual server.

// claimant is one service's claim on one virtual server key.
type claimant struct {
	svc     ServiceKey
	created time.Time
	kind    Kind
}

// kindRank orders the kinds of claim by who may write the address, the
// strongest first: the apiserver (ClusterIP, NodePort), a controller with
// services/status (LoadBalancer), any editor (ExternalIP).
func kindRank(k Kind) int {
	switch k {
	case KindClusterIP, KindNodePort:
		return 0
	case KindLoadBalancer:
		return 1
	}
	return 2
}

// compareClaimants orders claimants owner first.
func compareClaimants(a, b claimant) int {
	if c := cmp.Compare(kindRank(a.kind), kindRank(b.kind)); c != 0 {
		return c
	}
	if c := a.created.Compare(b.created); c != 0 {
		return c
	}
	return a.svc.Compare(b.svc)
}

// claimIndex is the engine's ownership state.
type claimIndex struct {
	byKey map[VirtualServerKey][]claimant // sorted, owner first
	bySvc map[ServiceKey][]VirtualServerKey
	// reassigned: services whose ownership of some key changed since the
	// last Reassigned call, other than through their own update.
	reassigned map[ServiceKey]struct{}
	// contested counts the keys with more than one claimant: without any,
	// every service owns all it claims (the usual cluster).
	contested int
}

func newClaimIndex() claimIndex {
	return claimIndex{byKey: map[VirtualServerKey][]claimant{}, bySvc: map[ServiceKey][]VirtualServerKey{},
		reassigned: map[ServiceKey]struct{}{}}
}

// owner returns the service that owns k, if any claims it.
func (ci *claimIndex) owner(k VirtualServerKey) (claimant, bool) {
	list := ci.byKey[k]
	if len(list) == 0 {
		return claimant{}, false
	}
	return list[0], true
}

// set replaces svc's claims. An owner change of any key marks the
// previous and the new owner reassigned.
func (ci *claimIndex) set(svc ServiceKey, claims []claimant, keys []VirtualServerKey) {
	old := ci.bySvc[svc]
	before := make(map[VirtualServerKey]ServiceKey, len(old)+len(keys))
	for _, k := range slices.Concat(old, keys) {
		o, _ := ci.owner(k)
		before[k] = o.svc
	}
	for _, k := range old {
		ci.edit(k, slices.DeleteFunc(ci.byKey[k], func(c claimant) bool { return c.svc == svc }))
	}
	delete(ci.bySvc, svc)
	for i, k := range keys {
		list := ci.byKey[k]
		if slices.ContainsFunc(list, func(x claimant) bool { return x.svc == svc }) {
			continue // claimed twice by one service (apiconv refuses duplicate ports)
		}
		j, _ := slices.BinarySearchFunc(list, claims[i], compareClaimants)
		ci.edit(k, slices.Insert(list, j, claims[i]))
	}
	if len(keys) > 0 {
		ci.bySvc[svc] = slices.Clone(keys)
	}
	var none ServiceKey
	for k, was := range before {
		o, _ := ci.owner(k)
		if o.svc == was {
			continue
		}
		for _, s := range []ServiceKey{was, o.svc} {
			if s != none {
				ci.reassigned[s] = struct{}{}
			}
		}
	}
}

func (ci *claimIndex) edit(k VirtualServerKey, list []claimant) {
	was, is := len(ci.byKey[k]) > 1, len(list) > 1
	switch {
	case is && !was:
		ci.contested++
	case was && !is:
		ci.contested--
	}
	if len(list) == 0 {
		delete(ci.byKey, k)
	} else {
		ci.byKey[k] = list
	}
}

// claim recomputes one service's claims from its spec and this node's
// addresses (not its endpoints: ownership does not depend on them).
func (e *Engine) claim(entry *serviceEntry) {
	svc := entry.svc
	if _, over := e.overBudget(svc); over || e.isCeilingRefused(svc.Key) {
		e.claims.set(svc.Key, nil, nil) // not served: claims nothing
		e.setHeld(svc.Key, svc.LoadBalancerIPs)
		return
	}
	e.setHeld(svc.Key, nil)
	var keys []VirtualServerKey
	var claims []claimant
	var buf [maxFrontends]frontend
	for i := range svc.ClusterIPs {
		for _, sp := range svc.Ports {
			for _, fe := range e.frontends(buf[:0], svc, sp, i) {
				for _, a := range fe.addrs {
					keys = append(keys, VirtualServerKey{Address: a, Protocol: sp.Protocol, Port: fe.port})
					claims = append(claims, claimant{svc: svc.Key, created: svc.Created, kind: fe.kind})
				}
			}
		}
	}
	e.claims.set(svc.Key, claims, keys)
}

// reclaimAll recomputes every service's claims, when this node's
// addresses change.
func (e *Engine) reclaimAll() {
	for _, entry := range e.services {
		e.claim(entry)
	}
}

// Reassigned returns, sorted, the services whose ownership of a virtual
// server changed since the last call because of another service or a
// node address change (a service's own upsert or deletion is not
// reported for itself, its caller knows). Their plans must be recomputed
// in the same batch as the change, so that a released virtual server is
// programmed for its new owner at once.
func (e *Engine) Reassigned() []ServiceKey {
	out := make([]ServiceKey, 0, len(e.claims.reassigned))
	for k := range e.claims.reassigned {
		out = append(out, k)
	}
	clear(e.claims.reassigned)
	slices.SortFunc(out, ServiceKey.Compare)
	return out
}

// owned drops from vss the virtual servers another service owns, and
// returns a Warning for each.
func (e *Engine) owned(key ServiceKey, vss []VirtualServer) ([]VirtualServer, []Warning) {
	if e.claims.contested == 0 {
		return vss, nil
	}
	var ws []Warning
	kept := vss[:0]
	for _, vs := range vss {
		o, ok := e.claims.owner(vs.Key())
		if !ok || o.svc == key {
			kept = append(kept, vs)
			continue
		}
		ws = append(ws, Warning{Object: "Service " + key.String(), Field: "spec.ports[" + vs.PortName + "]",
			Reason: ReasonVirtualServerConflict, Service: key, Message: fmt.Sprintf("%s virtual server %s is owned by Service %s (%s), which wins (%s); not served here",
				vs.Kind, vs.Key(), o.svc, o.kind, ownershipRule(o, vs.Kind))})
	}
	return kept, ws
}

// ownershipRule says why the owner won, for the loser's warning.
func ownershipRule(o claimant, lost Kind) string {
	switch r := kindRank(o.kind); {
	case r < kindRank(lost) && r == 0:
		return "an address the apiserver allocated beats a load-balancer or external IP"
	case r < kindRank(lost):
		return "a load-balancer IP, written by a controller, beats an external IP, written by any editor"
	}
	return "the oldest Service wins, then namespace/name"
}
