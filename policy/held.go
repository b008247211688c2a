package policy

import (
	"fmt"
	"net/netip"
	"slices"
)

// A refused Service keeps its load-balancer IPs. A Service the budget or
// the node-wide ceiling refuses (budget.go) claims no virtual server, yet
// its load balancer still sends its traffic to this node: another
// Service's spec.externalIPs entry (any editor's) must not take the
// address, on any port, as it could not while the refused Service was
// served and owned it. Held whole, not per port, so that refusing costs
// no expansion: other Services' load-balancer IPs (a controller's, which
// may share an address between Services) are not held back.

// setHeld records the load-balancer IPs key's Service holds while refused
// (nil: none) and reclaims the services listing a changed one as an
// external IP.
func (e *Engine) setHeld(key ServiceKey, lbIPs []netip.Addr) {
	var affected []ServiceKey
	for _, a := range editIndex(e.heldLB, key, e.heldBy[key], lbIPs) {
		for _, k := range e.externalUsers[a] {
			if k != key && !slices.Contains(affected, k) {
				affected = append(affected, k)
			}
		}
	}
	if len(lbIPs) == 0 {
		delete(e.heldBy, key)
	} else {
		e.heldBy[key] = slices.Clone(lbIPs)
	}
	e.reclaim(affected)
}

// unheld returns the external IPs no refused Service holds: addrs itself
// when none is.
func (e *Engine) unheld(addrs []netip.Addr) []netip.Addr {
	if len(e.heldLB) == 0 || !slices.ContainsFunc(addrs, e.isHeld) {
		return addrs
	}
	return slices.DeleteFunc(slices.Clone(addrs), e.isHeld)
}

func (e *Engine) isHeld(a netip.Addr) bool { return len(e.heldLB[a]) > 0 }

// heldWarnings names svc's external IPs that a refused Service holds.
func (e *Engine) heldWarnings(svc *Service) []Warning {
	if len(e.heldLB) == 0 {
		return nil
	}
	var ws []Warning
	for _, a := range svc.ExternalIPs {
		if !e.isHeld(a) || e.externalUse(a) != useBound && e.externalUse(a) != useOnNode {
			continue // not held, or refused for another reason, which its own warning says
		}
		ws = append(ws, Warning{Object: "Service " + svc.Key.String(), Field: "spec.externalIPs", Service: svc.Key,
			Reason: ReasonVirtualServerConflict,
			Message: fmt.Sprintf("%s is a load-balancer IP of Service %s, which keeps it on every port while refused (too many virtual servers); not served here",
				a, e.heldLB[a][0])})
	}
	return ws
}
